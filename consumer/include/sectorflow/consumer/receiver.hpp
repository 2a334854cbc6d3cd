// A receiver thread of a NodeGroup: the PULL socket that aggregator thread r pushes to
// (SPEC.md, "Roles and sockets"), bound on settings.host with a port chosen by the OS.
//
// Data messages are checked (header decoded, payload size) and forwarded over inproc to counting
// thread frame_number % counting_threads, payload frame moved, not copied. Info messages give the
// expected count of port r (counts[uid], 0 if the uid is absent). When r's part of a scan is over
// (all expected messages came, or the scan timed out, see scan_tracker.hpp) it sends an end
// marker to every counting thread. Malformed messages are counted and dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "sectorflow/consumer/nodegroup_counters.hpp"
#include "sectorflow/consumer/nodegroup_settings.hpp"
#include "sectorflow/consumer/scan_tracker.hpp"

namespace sectorflow::consumer {

class Receiver {
 public:
  /// Binds the PULL socket (throws NodeGroupError naming the address if it cannot) and connects
  /// one inproc PUSH to each counting thread (its endpoint prefix + this receiver's index).
  Receiver(zmq::context_t& context, const NodeGroupSettings& settings, std::uint32_t index,
           const std::vector<std::string>& worker_endpoints, ScanTracker& tracker, NodeGroupCounters& counters);
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  std::uint16_t port() const { return port_; }
  /// The thread body: runs until `stop` is set.
  void run(const std::atomic<bool>& stop);

 private:
  void handle(std::vector<zmq::message_t>& parts, const std::atomic<bool>& stop);
  void send_end(std::uint32_t scan, bool timed_out, const std::atomic<bool>& stop);

  const NodeGroupSettings& settings_;
  std::uint32_t index_;
  ScanTracker& tracker_;
  NodeGroupCounters& counters_;
  zmq::socket_t pull_;
  std::vector<zmq::socket_t> pushes_;
  std::uint16_t port_ = 0;
};

}  // namespace sectorflow::consumer
