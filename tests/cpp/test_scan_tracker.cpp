// ScanTracker: an aggregator thread's part of a scan times out on what that port heard, so a
// receiver that never starts the scan (or dies) ends its part while the others still deliver; the
// scans peers announce are bounded, and a scan keeps the shape its first message gave.
#include <chrono>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "sectorflow/consumer/nodegroup/scan_tracker.hpp"

using sectorflow::consumer::nodegroup::ScanTracker;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t kScan = 7;
constexpr std::uint64_t kBytes = 100;
constexpr std::uint32_t kSide = 8;
constexpr std::size_t kOpenScans = 16;
using Arrival = ScanTracker::Arrival;

Arrival data(ScanTracker& tracker, std::uint32_t scan, std::uint32_t receiver) {
  return tracker.on_data(scan, receiver, kBytes, kSide, kSide);
}

}  // namespace

TEST(ScanTracker, ASilentPortTimesOutWhileTheOthersStillDeliver) {
  ScanTracker tracker(4, 1000ms, kOpenScans);
  const auto start = ScanTracker::Clock::now();
  ASSERT_EQ(data(tracker, kScan, 0), Arrival::kAccepted);
  // Port 0 keeps delivering; port 3 never heard of the scan.
  EXPECT_TRUE(tracker.expire(0, start + 500ms).empty());
  EXPECT_TRUE(tracker.expire(3, start + 500ms).empty());
  EXPECT_EQ(tracker.expire(3, start + 5s), std::vector<std::uint32_t>{kScan});
  // Port 3's part is over: what it sends now is late; port 0 is not timed out by port 3's silence.
  EXPECT_EQ(data(tracker, kScan, 3), Arrival::kLate);
  EXPECT_EQ(data(tracker, kScan, 0), Arrival::kAccepted);
  EXPECT_TRUE(tracker.expire(0, ScanTracker::Clock::now() + 500ms).empty());
}

TEST(ScanTracker, APortTimesOutOnItsOwnLastMessage) {
  ScanTracker tracker(2, 1000ms, kOpenScans);
  ASSERT_EQ(data(tracker, kScan, 0), Arrival::kAccepted);
  ASSERT_EQ(data(tracker, kScan, 1), Arrival::kAccepted);
  const auto heard = ScanTracker::Clock::now();
  EXPECT_TRUE(tracker.expire(1, heard + 900ms).empty());
  EXPECT_EQ(tracker.expire(1, heard + 1100ms), std::vector<std::uint32_t>{kScan});
  const ScanTracker::Arrivals arrivals = tracker.take(kScan);
  EXPECT_TRUE(arrivals.timed_out);
  EXPECT_EQ(arrivals.received, (std::vector<std::uint64_t>{1, 1}));
}

TEST(ScanTracker, AMessageOfAnotherShapeThanTheScansFirstIsRefused) {
  ScanTracker tracker(2, 1000ms, kOpenScans);
  ASSERT_EQ(tracker.on_info(kScan, 0, 1, {"ng-a"}, kSide, kSide), Arrival::kAccepted);
  EXPECT_EQ(tracker.on_data(kScan, 1, kBytes, kSide, kSide + 1), Arrival::kMismatch);
  EXPECT_EQ(tracker.on_info(kScan, 1, 1, {"ng-a"}, 2 * kSide, kSide), Arrival::kMismatch);
  // Port 0's run reached its count; its part ends with port 1's (another run may still come).
  EXPECT_EQ(tracker.on_data(kScan, 0, kBytes, kSide, kSide), Arrival::kAccepted);
  EXPECT_EQ(tracker.take(kScan).received, (std::vector<std::uint64_t>{1, 0}));
}

TEST(ScanTracker, OpeningOneScanTooManyEvictsTheOldestByArrivalNeverTheNewOne) {
  ScanTracker tracker(2, 1h, 3);
  // Opened in the order 30, 10, 20: 30 is the oldest although its number is the highest.
  for (const std::uint32_t scan : {30U, 10U, 20U}) ASSERT_EQ(data(tracker, scan, 0), Arrival::kAccepted);
  // A replay of an old scan number is as new as any.
  ASSERT_EQ(data(tracker, 5, 0), Arrival::kAccepted);
  EXPECT_EQ(tracker.evicted(), 1U);
  // Every receiver ends the evicted scan's part at its next expiry pass, long before the timeout.
  const auto now = ScanTracker::Clock::now();
  EXPECT_EQ(tracker.expire(0, now), std::vector<std::uint32_t>{30});
  EXPECT_EQ(tracker.expire(1, now), std::vector<std::uint32_t>{30});
  const ScanTracker::Arrivals arrivals = tracker.take(30);
  EXPECT_TRUE(arrivals.evicted);
  EXPECT_TRUE(arrivals.timed_out);
  EXPECT_EQ(arrivals.received, (std::vector<std::uint64_t>{1, 0}));
  // The newly opened scan and the others are still live.
  for (const std::uint32_t scan : {5U, 10U, 20U}) EXPECT_EQ(data(tracker, scan, 1), Arrival::kAccepted);
}

TEST(ScanTracker, ScansBeingFinishedBoundTheTableAtTwiceTheOpenScans) {
  ScanTracker tracker(1, 1h, 2);
  // Each new scan evicts the oldest live one; evicted scans stay until their results are taken.
  for (std::uint32_t scan = 1; scan <= 4; ++scan) ASSERT_EQ(data(tracker, scan, 0), Arrival::kAccepted);
  EXPECT_EQ(tracker.evicted(), 2U);
  EXPECT_EQ(data(tracker, 5, 0), Arrival::kFull);
  // Taking a finished scan frees its slot.
  (void)tracker.expire(0, ScanTracker::Clock::now());
  (void)tracker.take(1);
  EXPECT_EQ(data(tracker, 5, 0), Arrival::kAccepted);
}

// A restarted aggregator resends what it announced for a scan (same port, same count): the second
// info changes nothing, whether the port's part is still open, already over, or the scan finished.
// Another count for the same port is refused and the first one stands.
TEST(ScanTracker, AnIdenticalRepeatedCountIsIdempotentAnotherIsRefused) {
  ScanTracker tracker(2, 1h, kOpenScans);
  ASSERT_EQ(tracker.on_info(kScan, 0, 2, {"ng-a"}, kSide, kSide), Arrival::kAccepted);
  EXPECT_EQ(tracker.on_info(kScan, 0, 2, {"ng-a"}, kSide, kSide), Arrival::kRepeated);
  EXPECT_EQ(tracker.on_info(kScan, 0, 3, {"ng-a"}, kSide, kSide), Arrival::kConflict);
  ASSERT_EQ(data(tracker, kScan, 0), Arrival::kAccepted);
  ASSERT_EQ(data(tracker, kScan, 0), Arrival::kAccepted);  // the first count (2) stands: port 0's run is over
  // The same count again is still only a repetition, not late.
  EXPECT_EQ(tracker.on_info(kScan, 0, 2, {"ng-a"}, kSide, kSide), Arrival::kRepeated);
  ASSERT_EQ(tracker.on_info(kScan, 1, 0, {"ng-a"}, kSide, kSide), Arrival::kLast);
  EXPECT_EQ(tracker.closed(0), std::vector<std::uint32_t>{kScan});  // port 0 ends with the scan
  const ScanTracker::Arrivals arrivals = tracker.take(kScan);
  EXPECT_EQ(arrivals.expected, (std::vector<std::int64_t>{2, 0}));
  EXPECT_EQ(arrivals.received, (std::vector<std::uint64_t>{2, 0}));
  EXPECT_EQ(arrivals.late, 0U);
  // Finished: the tracker remembers what was announced.
  EXPECT_EQ(tracker.on_info(kScan, 0, 2, {"ng-a"}, kSide, kSide), Arrival::kRepeated);
  EXPECT_EQ(tracker.on_info(kScan, 1, 0, {"ng-a"}, kSide, kSide), Arrival::kRepeated);
  EXPECT_EQ(tracker.on_info(kScan, 0, 5, {"ng-a"}, kSide, kSide), Arrival::kConflict);
  EXPECT_EQ(tracker.late(kScan), 0U);
}

// An aborted scan: relay thread r closed it having forwarded a count; port r's part ends when that
// many came, before the announced count and without the timeout.
TEST(ScanTracker, AnAbortedScansPortEndsWhenWhatItsRelayForwardedCame) {
  ScanTracker tracker(2, 1h, kOpenScans);
  ASSERT_EQ(tracker.on_info(kScan, 0, 100, {"ng-a"}, kSide, kSide), Arrival::kAccepted);
  ASSERT_EQ(tracker.on_info(kScan, 1, 100, {"ng-a"}, kSide, kSide), Arrival::kAccepted);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(data(tracker, kScan, 0), Arrival::kAccepted);
  ASSERT_EQ(data(tracker, kScan, 1), Arrival::kAccepted);
  // Relay 0 forwarded 3, all in: the part ends at the receiver's next look.
  tracker.close_at(kScan, 0, 3);
  EXPECT_EQ(tracker.closed(0), std::vector<std::uint32_t>{kScan});
  EXPECT_TRUE(tracker.closed(0).empty());
  EXPECT_EQ(data(tracker, kScan, 0), Arrival::kLate);
  // Relay 1 forwarded 2, one still on the way: its arrival ends the part.
  tracker.close_at(kScan, 1, 2);
  EXPECT_TRUE(tracker.closed(1).empty());
  EXPECT_EQ(data(tracker, kScan, 1), Arrival::kLast);
  const ScanTracker::Arrivals arrivals = tracker.take(kScan);
  EXPECT_FALSE(arrivals.timed_out);
  EXPECT_EQ(arrivals.received, (std::vector<std::uint64_t>{3, 2}));
  EXPECT_EQ(arrivals.expected, (std::vector<std::int64_t>{100, 100}));
  // A finished scan ignores a count that comes after.
  tracker.close_at(kScan, 0, 1);
  EXPECT_TRUE(tracker.closed(0).empty());
}

TEST(ScanTracker, AnAbortedScansCountWaitsForTheScanToOpen) {
  ScanTracker tracker(1, 1h, kOpenScans);
  tracker.close_at(kScan, 0, 1);
  tracker.close_at(kScan, 5, 1);  // no such port: ignored
  EXPECT_TRUE(tracker.closed(0).empty());
  EXPECT_EQ(data(tracker, kScan, 0), Arrival::kLast);
  EXPECT_EQ(tracker.take(kScan).received, (std::vector<std::uint64_t>{1}));
}

// Runs (SPEC.md, "Runs of a scan at the NodeGroups"): a stray run that announces one message and
// ends before the real run begins on the same port does not end the port's part; the real run's
// count is taken too, and each run is counted apart.
TEST(ScanTracker, AStrayRunBeforeTheRealRunNeverLowersWhatTheRealRunCounts) {
  constexpr std::uint32_t kStray = 11;
  constexpr std::uint32_t kReal = 22;
  ScanTracker tracker(2, 1h, kOpenScans);
  ASSERT_EQ(tracker.on_data(kScan, 0, kBytes, kSide, kSide, kStray), Arrival::kAccepted);
  ASSERT_EQ(tracker.on_info(kScan, 0, 1, {"ng-a"}, kSide, kSide, kStray), Arrival::kAccepted);
  // Port 0 heard only the stray run, which is over, but port 1 is not: no end marker yet.
  EXPECT_TRUE(tracker.closed(0).empty());
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(tracker.on_data(kScan, 0, kBytes, kSide, kSide, kReal), Arrival::kAccepted);
    ASSERT_EQ(tracker.on_data(kScan, 1, kBytes, kSide, kSide, kReal), Arrival::kAccepted);
  }
  // The stray run's count was reached: a further message of it is late, the real run's are not.
  EXPECT_EQ(tracker.on_data(kScan, 0, kBytes, kSide, kSide, kStray), Arrival::kLate);
  // A repeated count touches its own run only; another count for it is refused.
  EXPECT_EQ(tracker.on_info(kScan, 0, 1, {"ng-a"}, kSide, kSide, kStray), Arrival::kRepeated);
  EXPECT_EQ(tracker.on_info(kScan, 0, 5, {"ng-a"}, kSide, kSide, kStray), Arrival::kConflict);
  ASSERT_EQ(tracker.on_info(kScan, 0, 3, {"ng-a"}, kSide, kSide, kReal), Arrival::kAccepted);
  ASSERT_EQ(tracker.on_info(kScan, 1, 3, {"ng-a"}, kSide, kSide, kReal), Arrival::kLast);
  EXPECT_EQ(tracker.closed(0), std::vector<std::uint32_t>{kScan});
  const ScanTracker::Arrivals arrivals = tracker.take(kScan);
  EXPECT_FALSE(arrivals.timed_out);
  EXPECT_EQ(arrivals.received, (std::vector<std::uint64_t>{4, 3}));
  EXPECT_EQ(arrivals.expected, (std::vector<std::int64_t>{4, 3}));
  ASSERT_EQ(arrivals.runs.size(), 2U);
  ASSERT_EQ(arrivals.runs[0].size(), 2U);
  EXPECT_EQ(arrivals.runs[0][0].run, kStray);
  EXPECT_EQ(arrivals.runs[0][0].received, 1U);
  EXPECT_EQ(arrivals.runs[0][1].run, kReal);
  EXPECT_EQ(arrivals.runs[0][1].expected, 3);
  EXPECT_EQ(arrivals.late, 1U);
  // Finished: each run's count is remembered apart.
  EXPECT_EQ(tracker.on_info(kScan, 0, 3, {"ng-a"}, kSide, kSide, kReal), Arrival::kRepeated);
  EXPECT_EQ(tracker.on_info(kScan, 0, 1, {"ng-a"}, kSide, kSide, kStray), Arrival::kRepeated);
}

// Peers choose runs: at most kMaxRuns per scan and port are counted, a further run is refused.
TEST(ScanTracker, RunsPerScanAndPortAreBounded) {
  ScanTracker tracker(1, 1h, kOpenScans);
  for (std::uint32_t run = 1; run <= ScanTracker::kMaxRuns; ++run) {
    ASSERT_EQ(tracker.on_data(kScan, 0, kBytes, kSide, kSide, run), Arrival::kAccepted);
  }
  EXPECT_EQ(tracker.on_data(kScan, 0, kBytes, kSide, kSide, 99), Arrival::kRuns);
  EXPECT_EQ(tracker.on_info(kScan, 0, 1, {"ng-a"}, kSide, kSide, 99), Arrival::kRuns);
  EXPECT_EQ(tracker.on_data(kScan, 0, kBytes, kSide, kSide, 1), Arrival::kAccepted);
  EXPECT_EQ(tracker.take(kScan).received, (std::vector<std::uint64_t>{ScanTracker::kMaxRuns + 1}));
}
