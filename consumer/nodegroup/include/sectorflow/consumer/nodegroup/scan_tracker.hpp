// Which scans a NodeGroup is receiving, and when each aggregator thread's part of a scan is over
// (SPEC.md, steps 5 and 6). Shared by the receiver threads (one per aggregator thread r):
//   - a data message of scan n on port r is accepted unless r's part of n is over (late: dropped);
//   - r's part is over when r's expected count (from its info message, which may come before or
//     after the data) equals the data messages accepted on port r, or when no message of the scan
//     has come on port r for the timeout (then the scan is marked timed out): a receiver that died,
//     or never started the scan, does not keep the others' frames waiting as long as they trickle in;
//   - the receiver whose part is over tells every counting thread (an end marker after its data).
// A scan is forgotten by take(); its number is remembered so that later messages count as late.
//
// Peers announce scans, so the tracker bounds them: a scan's shape is fixed by its first message
// (a message of another shape is refused), and at most max_open_scans scans are live at once.
// Opening one more evicts the live scan opened first, never the new one: its parts end at the
// receivers' next expiry pass as if timed out, and it is written with what arrived. Scans being
// finished count too, up to twice the bound; beyond that a new scan is refused.
//
// An aborted scan (sectorflow abort) closes by what its relay threads forwarded instead of what
// the producers announced: once relay thread r closed it, r's part here is over when the messages
// r forwarded to this NodeGroup have come (close_at), without waiting for the timeout. Thread-safe.
//
// Runs (SPEC.md, "Runs of a scan at the NodeGroups"): a relay thread tags each message and count
// with its run of the scan, and the tracker counts each (scan, port, run) apart, at most kMaxRuns
// per scan and port: a run's count is taken once and ends that run only, so what a stray run (or a
// restarted relay's) announces never ends the real run's part. A port whose every run heard is over
// by its count may still hear another run (the real run after a stray's), so its end marker waits
// until every port of the scan is over; a port timed out, closed by an abort or evicted ends at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::consumer::nodegroup {

class ScanTracker {
 public:
  using Clock = std::chrono::steady_clock;

  ScanTracker(std::uint32_t receivers, std::chrono::milliseconds timeout, std::size_t max_open_scans);

  /// What became of a message.
  enum class Arrival {
    kAccepted,
    kLast,      ///< accepted, and r's part of the scan is now over
    kLate,      ///< r's part of the scan is over (or the scan finished): dropped
    kMismatch,  ///< another scan shape than the scan's first message gave: refused
    kFull,      ///< a new scan while every slot holds a scan being finished: refused
    kRepeated,  ///< an info with the count r already had (a restarted aggregator resends it): no change
    kConflict,  ///< an info with another count than r already had: refused, the first one stands
    kRuns,      ///< a run beyond kMaxRuns of the scan on this port: refused
  };
  /// Runs of one scan counted per port; a further run's messages are refused (kRuns).
  static constexpr std::size_t kMaxRuns = protocol::kMaxRunsPerPort;
  /// A data message of `scan` (of shape scan_x x scan_y) on port `receiver`, of relay run `run`.
  /// kLast if it ends r's part (the scan is over on every port, or r's abort count is reached).
  Arrival on_data(std::uint32_t scan, std::uint32_t receiver, std::uint64_t bytes, std::uint32_t scan_x,
                  std::uint32_t scan_y, std::uint32_t run = 0);
  /// An info message: run `run`'s expected count on port r, the routing list and the scan shape.
  /// kLast if r's part is now over. A second info for (r, run) is idempotent: the same count again
  /// (a restarted aggregator resends what it announced, even after r's part is over) is kRepeated,
  /// another count kConflict.
  Arrival on_info(std::uint32_t scan, std::uint32_t receiver, std::uint64_t expected, std::vector<std::string> routing,
                  std::uint32_t scan_x, std::uint32_t scan_y, std::uint32_t run = 0);
  /// Scans whose part of `receiver` is not over but whose last message is older than the timeout,
  /// or that were evicted: their part of r is now over (timed out). The caller sends their end
  /// markers.
  std::vector<std::uint32_t> expire(std::uint32_t receiver, Clock::time_point now);

  /// Aborted scan `scan`: relay thread `receiver` closed it having forwarded `forwarded` messages to
  /// this NodeGroup, so r's part is over once that many came, whatever its info announced. Kept for
  /// a scan not open yet (its first message is still on the way), bounded like the open scans; a
  /// finished scan ignores it.
  void close_at(std::uint32_t scan, std::uint32_t receiver, std::uint64_t forwarded);
  /// Scans whose part of `receiver` is now over by their close_at() count, or by the counts of
  /// its runs now that every port of the scan is over (not timed out). The caller sends their end
  /// markers.
  std::vector<std::uint32_t> closed(std::uint32_t receiver);

  /// What the receivers learnt about a scan, removed from the tracker (the scan becomes finished).
  /// One run's count on one port.
  struct RunCount {
    std::uint32_t run = 0;
    std::int64_t expected = -1;  ///< -1 until its info came
    std::uint64_t received = 0;
  };
  struct Arrivals {
    std::vector<std::string> routing;
    std::vector<std::int64_t> expected;  ///< per port, summed over its runs; -1 where a run's info is missing
    std::vector<std::uint64_t> received;  ///< per port, summed over its runs
    std::vector<std::vector<RunCount>> runs;  ///< per port: each run heard, in arrival order
    std::uint64_t bytes = 0;
    std::uint64_t late = 0;  ///< data that came on a port after its part was over, dropped
    bool timed_out = false;
    bool evicted = false;    ///< closed early to make room for a newer scan
    double first_message_s = 0.0;
    double last_message_s = 0.0;
  };
  Arrivals take(std::uint32_t scan);
  /// Messages that came for `scan` after it ended.
  std::uint64_t late(std::uint32_t scan) const;
  /// Scans evicted so far.
  std::uint64_t evicted() const;

  /// Progress of the scans being received, for status: (scan, received, expected or -1 if an
  /// info is missing, over for every receiver).
  struct Progress {
    std::uint32_t scan = 0;
    std::uint64_t received = 0;
    std::int64_t expected = -1;
    bool arrived = false;
  };
  std::vector<Progress> progress() const;

 private:
  struct Scan {
    std::uint64_t opened = 0;  ///< arrival order
    std::uint32_t scan_x = 0;
    std::uint32_t scan_y = 0;
    std::vector<std::string> routing;
    std::vector<std::vector<RunCount>> runs;  ///< per port
    std::vector<std::uint64_t> received;      ///< per port, summed over its runs
    std::vector<bool> forced;  ///< per port: over by timeout, abort count or eviction (final)
    std::vector<bool> ended;   ///< per port: its end marker is sent; what comes after is late
    std::uint64_t bytes = 0;
    std::uint64_t late = 0;
    bool timed_out = false;
    bool evicted = false;
    std::vector<std::int64_t> close_at;    ///< per port: close_at()'s count, -1 if none came
    std::vector<Clock::time_point> heard;  ///< per port: the last message of the scan
    double first_message_s = 0.0;
    double last_message_s = 0.0;

    /// Port r's part is over: forced, or every run heard on it reached its count.
    bool over(std::uint32_t r) const;
    bool all_over() const;
    /// The run `run` on port r, added if new; null if r holds kMaxRuns others.
    RunCount* run_of(std::uint32_t r, std::uint32_t run);
    /// Whether port r's part is over by its close_at() count.
    bool closing(std::uint32_t r) const {
      return close_at[r] >= 0 && received[r] >= static_cast<std::uint64_t>(close_at[r]);
    }
  };
  /// The scan, opened if new (evicting one if needed); null if the tracker is full.
  Scan* scan_locked(std::uint32_t scan, std::uint32_t receiver, std::uint32_t scan_x, std::uint32_t scan_y);
  void evict_oldest_live_locked();
  bool finished_locked(std::uint32_t scan) const;
  /// After an accepted message or count on port `receiver` (not ended yet): whether its part ends
  /// now; marks it ended if so.
  static bool end_locked(Scan& s, std::uint32_t receiver);

  std::uint32_t receivers_;
  std::chrono::milliseconds timeout_;
  std::size_t max_open_scans_;
  mutable std::mutex mutex_;
  std::map<std::uint32_t, Scan> scans_;
  std::uint64_t opened_ = 0;
  std::uint64_t evicted_ = 0;
  // Finished scans (bounded): the late messages each got and the counts its infos announced (a
  // repeated info of a finished scan is recognised as such, not counted late).
  struct Finished {
    std::uint64_t late = 0;
    std::vector<std::vector<RunCount>> runs;  ///< per port
  };
  std::map<std::uint32_t, Finished> finished_;
  /// close_at() counts of scans not open yet (per port, -1 for none), applied when they open.
  std::map<std::uint32_t, std::vector<std::int64_t>> close_pending_;
  std::deque<std::uint32_t> finished_order_;
};

}  // namespace sectorflow::consumer::nodegroup
