// What one relay thread knows about one scan (SPEC.md steps 4 and 5): the routing list learnt
// from the producer threads' info messages (or, after a restart, from their scan records), the sum
// of their counts per NodeGroup, what has been forwarded or lost so far, and which NodeGroups are
// dead for the scan (their messages are dropped and no longer awaited).
//
// A native scan (SPEC.md, "Two dialects") has no info messages: its routing list comes from
// NativeRoutes, and each thread's first header says how many messages the thread sends. It is
// complete when every thread has sent that many; the NodeGroups then get, as their expected count,
// what was forwarded to them (closing_counts()).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "downstream.hpp"
#include "sectorflow/aggregator/counters.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/info_message.hpp"
#include "sectorflow/protocol/scan_records.hpp"

namespace sectorflow::aggregator::detail {

/// One NodeGroup of a scan's routing list.
struct Target {
  std::string uid;
  std::shared_ptr<Downstream> downstream;  ///< null while the uid is not (or no longer) reachable
  std::uint64_t expected = 0;              ///< sum of the info counts received so far
  std::uint64_t forwarded = 0;
  std::uint64_t lost = 0;
  bool info_sent = false;                  ///< the expected count went to this NodeGroup
  bool dead = false;                       ///< declared dead for this scan: dropped, counted lost, not awaited
  std::string dead_why;
};

class ScanState {
 public:
  /// A scan whose first info message is `info` (already checked by the caller). Its NodeGroups
  /// may be missing from the kvstore until `discovery_deadline` (a replica may lag the producers').
  ScanState(const protocol::InfoMessage& info, std::uint32_t producer_threads,
            std::chrono::steady_clock::time_point discovery_deadline);

  /// Adds the counts of one producer thread's info. Returns an error text (the info is then
  /// ignored) for a thread already heard from or a routing list unlike the first one. With
  /// `from_record` the info was rebuilt from the thread's scan record; the thread's own info, if it
  /// still comes (it was queued in the producer while the relay restarted), is then taken as heard
  /// already when it says the same.
  std::string add_info(const protocol::InfoMessage& info, bool from_record = false);

  /// A native scan of `threads` threads routed by `routing` (possibly empty: no NodeGroup).
  static ScanState native(std::uint32_t scan_number, std::uint32_t scan_x, std::uint32_t scan_y,
                          std::vector<std::string> routing, std::uint32_t threads,
                          std::chrono::steady_clock::time_point discovery_deadline);
  bool is_native() const { return native_; }
  /// Counts one message of a native thread that announced `frames` messages for the scan. Returns
  /// an error text (the message is then refused) if the thread announced another number before.
  std::string native_arrival(std::uint32_t thread, std::uint32_t frames);
  /// A native thread that sends this member of the tier nothing of the scan (its producer record
  /// says so): heard, with nothing to come. A native stream has no info message to say it.
  void native_silent(std::uint32_t thread);
  /// A native scan closes: each NodeGroup's expected count becomes what was forwarded to it.
  void closing_counts();
  /// Messages of the scan this thread forwarded or counted lost so far.
  std::uint64_t handled() const { return forwarded_ + lost_; }
  /// Messages the native threads heard from announced, in all.
  std::uint64_t announced() const;
  /// What native thread `thread`'s headers announced (num_frames_this_thread), 0 if not heard.
  std::uint32_t announced(std::uint32_t thread) const { return thread < announced_.size() ? announced_[thread] : 0; }
  /// Whether the scan has a NodeGroup to route to (a native scan may have none).
  bool routable() const { return !targets_.empty(); }
  /// When a message of the scan last arrived at this thread.
  std::chrono::steady_clock::time_point last_activity() const { return last_; }

  bool infos_complete() const { return infos_ == heard_.size(); }
  /// Whether producer thread `thread`'s info is in (false for a thread id out of range).
  bool heard(std::uint32_t thread) const { return thread < heard_.size() && heard_[thread]; }
  std::size_t infos() const { return infos_; }
  /// Every expected message forwarded or lost, a dead NodeGroup's not awaited: the scan is over for
  /// this thread.
  bool complete() const;

  /// Declares `target` dead for this scan; false if it already was.
  bool declare_dead(Target& target, std::string why);
  /// The scan was rebuilt from the producers' scan records (the relay restarted mid-scan).
  void mark_recovered() { recovered_ = true; }
  bool recovered() const { return recovered_; }
  /// Whether messages were handled since the last record_written(): a rebuilt scan cannot know
  /// what the process before it forwarded, so it never completes by its counts; its record is
  /// rewritten when the thread falls idle.
  bool record_stale() const { return forwarded_ + lost_ != recorded_; }
  void record_written() { recorded_ = forwarded_ + lost_; }

  /// Whether a data header's scan shape is the one the infos announced.
  bool fits(const protocol::DataHeader& header) const {
    return header.scan_x == scan_x_ && header.scan_y == scan_y_;
  }
  std::chrono::steady_clock::time_point discovery_deadline() const { return discovery_deadline_; }

  Target& target_of(std::uint32_t frame_number) { return targets_[frame_number % targets_.size()]; }
  std::vector<Target>& targets() { return targets_; }
  /// The target of NodeGroup `uid`, or null if it is not in the routing list.
  Target* target(const std::string& uid);
  void forwarded(Target& target, std::size_t bytes) {
    ++target.forwarded;
    ++forwarded_;
    bytes_ += bytes;
    last_ = std::chrono::steady_clock::now();
  }
  /// A message of a scan with no NodeGroup to route to (a native scan that began with none).
  void lost_unrouted() {
    ++lost_;
    last_ = std::chrono::steady_clock::now();
  }
  void lost(Target& target) {
    ++target.lost;
    ++lost_;
    last_ = std::chrono::steady_clock::now();
  }

  /// The expected-count message for NodeGroup `target` (SPEC.md step 5).
  protocol::InfoMessage expected_info(const Target& target, std::uint32_t receiver) const;
  /// `closed`: the scan closes at this thread (false: an interim report of a NodeGroup declared dead).
  ScanSummary summary(std::uint32_t thread, bool closed) const;
  /// scans/<n>/aggregator/t<thread>: forwarded and lost per NodeGroup of the routing list (zeros
  /// included), the dead ones; complete only when `closed` and complete().
  protocol::RelayScanRecord record(std::uint32_t thread, bool closed) const;
  std::uint32_t scan_number() const { return scan_number_; }
  /// This thread's run of the scan (SPEC.md "Runs of a scan"): random and never 0, so that a
  /// restarted aggregator does not repeat its predecessor's; carried by every header and count
  /// sent to the NodeGroups, which count each run apart.
  std::uint32_t run() const { return run_; }
  /// A scan rebuilt after a restart goes on with the run of the record it was rebuilt from: the
  /// NodeGroups hold that run's earlier messages.
  void continue_run(std::uint32_t run) {
    if (run != 0) run_ = run;
  }

 private:
  std::uint32_t scan_number_;
  std::uint32_t run_;
  std::uint32_t scan_x_;
  std::uint32_t scan_y_;
  std::vector<std::string> routing_;
  std::vector<Target> targets_;
  std::vector<bool> heard_;  ///< per producer thread: its info arrived
  std::vector<std::optional<protocol::InfoMessage>> from_record_;  ///< per thread: the info rebuilt from its record
  bool recovered_ = false;
  bool native_ = false;
  std::vector<std::uint32_t> announced_;  ///< native, per thread: its headers' num_frames_this_thread (0: not heard)
  std::vector<std::uint64_t> arrived_;    ///< native, per thread: its messages that arrived (refused ones aside)
  std::uint64_t recorded_ = 0;  ///< forwarded_ + lost_ when the record was last written
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
