// A receiver thread of a NodeGroup: the PULL socket that aggregator thread r pushes to
// (SPEC.md, "Roles and sockets"), bound on settings.host with a port chosen by the OS.
//
// Data messages are checked as the aggregator checks them (protocol::decode_data: geometry, scan
// limits, sector r, payload size; then the scan's shape) and forwarded over inproc to counting
// thread worker_of(frame), payload frame moved, not copied. Info messages give the expected count
// of port r (counts[uid], 0 if the uid is absent). When r's part of a scan is over (all expected
// messages came, or the scan timed out or was evicted, see scan_tracker.hpp) it sends an end
// marker to every counting thread. Refused messages are counted by kind and dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "sectorflow/consumer/nodegroup/nodegroup_counters.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_settings.hpp"
#include "sectorflow/consumer/nodegroup/scan_tracker.hpp"
#include "sectorflow/protocol/data_message.hpp"

namespace sectorflow::consumer::nodegroup {

class Receiver {
 public:
  /// Binds the PULL socket (throws NodeGroupError naming the address if it cannot) and connects
  /// one inproc PUSH to each counting thread (its endpoint prefix + this receiver's index).
  Receiver(zmq::context_t& context, const NodeGroupSettings& settings, std::uint32_t index,
           const std::vector<std::string>& worker_endpoints, ScanTracker& tracker, NodeGroupCounters& counters);
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  std::uint16_t port() const { return port_; }
  /// The thread body: runs until `stop` is set; what one message makes fail is counted
  /// (Refusal::kError) and the loop goes on.
  void run(const std::atomic<bool>& stop);

 private:
  void handle(std::vector<zmq::message_t>& parts, const std::atomic<bool>& stop);
  void on_info(const zmq::message_t& message, const std::atomic<bool>& stop);
  /// Counts what the tracker did not accept; true if the message goes on.
  bool accepted(ScanTracker::Arrival arrival, std::uint32_t scan);
  void send_end(std::uint32_t scan, bool timed_out, const std::atomic<bool>& stop);

  const NodeGroupSettings& settings_;
  std::uint32_t index_;
  protocol::DataExpectations expect_;
  ScanTracker& tracker_;
  NodeGroupCounters& counters_;
  zmq::socket_t pull_;
  std::vector<zmq::socket_t> pushes_;
  std::uint16_t port_ = 0;
};

}  // namespace sectorflow::consumer::nodegroup
