// What one relay thread knows about one scan (SPEC.md steps 4 and 5): the routing list learnt
// from the producer threads' info messages, the sum of their counts per NodeGroup, and what has
// been forwarded or lost so far.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "downstream.hpp"
#include "sectorflow/aggregator/counters.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/info_message.hpp"

namespace sectorflow::aggregator::detail {

/// One NodeGroup of a scan's routing list.
struct Target {
  std::string uid;
  std::shared_ptr<Downstream> downstream;  ///< null while the uid is not (or no longer) reachable
  std::uint64_t expected = 0;              ///< sum of the info counts received so far
  std::uint64_t forwarded = 0;
  std::uint64_t lost = 0;
  bool info_sent = false;                  ///< the expected count went to this NodeGroup
};

class ScanState {
 public:
  /// A scan whose first info message is `info` (already checked by the caller). Its NodeGroups
  /// may be missing from the kvstore until `discovery_deadline` (a replica may lag the producers').
  ScanState(const protocol::InfoMessage& info, std::uint32_t producer_threads,
            std::chrono::steady_clock::time_point discovery_deadline);

  /// Adds the counts of one producer thread's info. Returns an error text (the info is then
  /// ignored) for a thread already heard from or a routing list unlike the first one.
  std::string add_info(const protocol::InfoMessage& info);

  bool infos_complete() const { return infos_ == heard_.size(); }
  /// Every expected message forwarded or lost: the scan is over for this thread.
  bool complete() const { return infos_complete() && forwarded_ + lost_ >= expected_; }

  /// Whether a data header's scan shape is the one the infos announced.
  bool fits(const protocol::DataHeader& header) const {
    return header.scan_x == scan_x_ && header.scan_y == scan_y_;
  }
  std::chrono::steady_clock::time_point discovery_deadline() const { return discovery_deadline_; }

  Target& target_of(std::uint32_t frame_number) { return targets_[frame_number % targets_.size()]; }
  std::vector<Target>& targets() { return targets_; }
  void forwarded(Target& target, std::size_t bytes) {
    ++target.forwarded;
    ++forwarded_;
    bytes_ += bytes;
    last_ = std::chrono::steady_clock::now();
  }
  void lost(Target& target) {
    ++target.lost;
    ++lost_;
    last_ = std::chrono::steady_clock::now();
  }

  /// The expected-count message for NodeGroup `target` (SPEC.md step 5).
  protocol::InfoMessage expected_info(const Target& target, std::uint32_t receiver) const;
  ScanSummary summary(std::uint32_t thread) const;
  std::uint32_t scan_number() const { return scan_number_; }

 private:
  std::uint32_t scan_number_;
  std::uint32_t scan_x_;
  std::uint32_t scan_y_;
  std::vector<std::string> routing_;
  std::vector<Target> targets_;
  std::vector<bool> heard_;  ///< per producer thread: its info arrived
  std::size_t infos_ = 0;
  std::uint64_t expected_ = 0;
  std::uint64_t forwarded_ = 0;
  std::uint64_t lost_ = 0;
  std::uint64_t bytes_ = 0;
  std::chrono::steady_clock::time_point first_;
  std::chrono::steady_clock::time_point last_;
  std::chrono::steady_clock::time_point discovery_deadline_;
};

}  // namespace sectorflow::aggregator::detail
