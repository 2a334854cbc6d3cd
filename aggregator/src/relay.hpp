// One aggregator thread r (SPEC.md steps 4 and 5): pulls from the producer threads of receiver r,
// learns each scan's routing from their info messages, forwards the expected counts, and moves
// every data message unchanged to the NodeGroup routing[frame % n] of its scan.
//
// Every message is checked as a NodeGroup would check it (protocol::decode_data, the scan's shape)
// before it is routed, so a bad message never crosses the WAN; a refused one is counted by kind.
// Open scans are bounded (scan_table.hpp). No message blocks the thread for long: a NodeGroup
// missing from the kvstore is waited for only by its scan's data, and only until the scan's
// discovery deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "directory.hpp"
#include "downstream.hpp"
#include "scan_state.hpp"
#include "scan_table.hpp"
#include "sectorflow/aggregator/counters.hpp"
#include "sectorflow/protocol/data_message.hpp"

namespace sectorflow::aggregator::detail {

struct RelaySettings {
  std::uint32_t receiver = 0;
  std::uint32_t producer_threads = 1;
  int hwm = 1;
  std::chrono::milliseconds discovery_wait{0};
  std::size_t max_open_scans = 1;
  protocol::DataExpectations expect;  ///< geometry, scan limits, and sector = receiver
};

class Relay {
 public:
  /// Takes the PULL socket already bound by the aggregator. `report` receives every scan summary.
  Relay(zmq::context_t& context, zmq::socket_t pull, const Directory& directory, RelaySettings settings,
        RelayCounters& counters, std::function<void(ScanSummary)> report);

  /// The loop; returns when `stop` is set. What one message makes fail is counted
  /// (Refusal::kError) and the loop goes on.
  void run(const std::atomic<bool>& stop);

 private:
  /// Reads and handles one message; false if none was waiting.
  bool receive_one();
  void on_info(const zmq::message_t& message);
  void on_data(zmq::message_t* parts);
  /// Brings the downstream sockets in line with the kvstore after a change.
  void refresh();
  /// Gives each target of `scan` a live downstream if its uid is registered; with `wait`, waits
  /// until the scan's discovery deadline for the missing ones.
  void resolve(ScanState& scan, bool wait);
  std::shared_ptr<Downstream> downstream_for(const std::string& uid);
  /// Sends the expected counts to the targets that have not had them, once all infos are in.
  void send_expected(ScanState& scan);
  void finish_if_complete(ScanState& scan);
  void report(const ScanState& scan);

  zmq::context_t& context_;
  zmq::socket_t pull_;
  const Directory& directory_;
  RelaySettings settings_;
  RelayCounters& counters_;
  std::function<void(ScanSummary)> report_;
  const std::atomic<bool>* stop_ = nullptr;
  std::uint64_t generation_ = 0;
  zmq::message_t parts_[2];
  std::map<std::string, std::shared_ptr<Downstream>> downstreams_;  ///< by uid
  ScanTable scans_;
};

}  // namespace sectorflow::aggregator::detail
