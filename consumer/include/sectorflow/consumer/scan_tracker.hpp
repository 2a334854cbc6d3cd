// Which scans a NodeGroup is receiving, and when each aggregator thread's part of a scan is over
// (SPEC.md, steps 5 and 6). Shared by the receiver threads (one per aggregator thread r):
//   - a data message of scan n on port r is accepted unless r's part of n is over (late: dropped);
//   - r's part is over when r's expected count (from its info message, which may come before or
//     after the data) equals the data messages accepted on port r, or when no message of the scan
//     has come on port r for the timeout (then the scan is marked timed out): a receiver that died,
//     or never started the scan, does not keep the others' frames waiting as long as they trickle in;
//   - the receiver whose part is over tells every counting thread (an end marker after its data).
// A scan is forgotten by take(); its number is remembered so that later messages count as late.
// Thread-safe.
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

namespace sectorflow::consumer {

class ScanTracker {
 public:
  using Clock = std::chrono::steady_clock;

  ScanTracker(std::uint32_t receivers, std::chrono::milliseconds timeout);

  enum class Data { kAccepted, kAcceptedLast, kLate };
  /// A data message of `scan` on port `receiver`: accepted (the last one of r's part) or late.
  Data on_data(std::uint32_t scan, std::uint32_t receiver, std::uint64_t bytes);
  /// An info message: r's expected count and the routing list. True if r's part is now over.
  bool on_info(std::uint32_t scan, std::uint32_t receiver, std::uint64_t expected, std::vector<std::string> routing);
  /// Scans whose part of `receiver` is not over but whose last message is older than the timeout:
  /// their part of r is now over (timed out). The caller sends their end markers.
  std::vector<std::uint32_t> expire(std::uint32_t receiver, Clock::time_point now);

  /// What the receivers learnt about a scan, removed from the tracker (the scan becomes finished).
  struct Arrivals {
    std::vector<std::string> routing;
    std::vector<std::int64_t> expected;  ///< -1 where no info came
    std::vector<std::uint64_t> received;
    std::uint64_t bytes = 0;
    std::uint64_t late = 0;  ///< data that came on a port after its part was over, dropped
    bool timed_out = false;
    double first_message_s = 0.0;
    double last_message_s = 0.0;
  };
  Arrivals take(std::uint32_t scan);
  /// Messages that came for `scan` after it ended.
  std::uint64_t late(std::uint32_t scan) const;

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
    std::vector<std::string> routing;
    std::vector<std::int64_t> expected;
    std::vector<std::uint64_t> received;
    std::vector<bool> over;
    std::uint64_t bytes = 0;
    std::uint64_t late = 0;
    bool timed_out = false;
    std::vector<Clock::time_point> heard;  ///< per port: the last message of the scan
    double first_message_s = 0.0;
    double last_message_s = 0.0;
  };
  Scan& scan_locked(std::uint32_t scan, std::uint32_t receiver);
  bool finished_locked(std::uint32_t scan) const;

  std::uint32_t receivers_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::map<std::uint32_t, Scan> scans_;
  // Finished scans (bounded) and the late messages each got.
  std::map<std::uint32_t, std::uint64_t> finished_;
  std::deque<std::uint32_t> finished_order_;
};

}  // namespace sectorflow::consumer
