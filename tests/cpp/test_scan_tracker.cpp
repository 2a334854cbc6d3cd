// ScanTracker: an aggregator thread's part of a scan times out on what that port heard, so a
// receiver that never starts the scan (or dies) ends its part while the others still deliver.
#include <chrono>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "sectorflow/consumer/scan_tracker.hpp"

using sectorflow::consumer::ScanTracker;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t kScan = 7;
constexpr std::uint64_t kBytes = 100;

}  // namespace

TEST(ScanTracker, ASilentPortTimesOutWhileTheOthersStillDeliver) {
  ScanTracker tracker(4, 1000ms);
  const auto start = ScanTracker::Clock::now();
  ASSERT_EQ(tracker.on_data(kScan, 0, kBytes), ScanTracker::Data::kAccepted);
  // Port 0 keeps delivering; port 3 never heard of the scan.
  EXPECT_TRUE(tracker.expire(0, start + 500ms).empty());
  EXPECT_TRUE(tracker.expire(3, start + 500ms).empty());
  EXPECT_EQ(tracker.expire(3, start + 5s), std::vector<std::uint32_t>{kScan});
  // Port 3's part is over: what it sends now is late; port 0 is not timed out by port 3's silence.
  EXPECT_EQ(tracker.on_data(kScan, 3, kBytes), ScanTracker::Data::kLate);
  EXPECT_EQ(tracker.on_data(kScan, 0, kBytes), ScanTracker::Data::kAccepted);
  EXPECT_TRUE(tracker.expire(0, ScanTracker::Clock::now() + 500ms).empty());
}

TEST(ScanTracker, APortTimesOutOnItsOwnLastMessage) {
  ScanTracker tracker(2, 1000ms);
  ASSERT_EQ(tracker.on_data(kScan, 0, kBytes), ScanTracker::Data::kAccepted);
  ASSERT_EQ(tracker.on_data(kScan, 1, kBytes), ScanTracker::Data::kAccepted);
  const auto heard = ScanTracker::Clock::now();
  EXPECT_TRUE(tracker.expire(1, heard + 900ms).empty());
  EXPECT_EQ(tracker.expire(1, heard + 1100ms), std::vector<std::uint32_t>{kScan});
  const ScanTracker::Arrivals arrivals = tracker.take(kScan);
  EXPECT_TRUE(arrivals.timed_out);
  EXPECT_EQ(arrivals.received, (std::vector<std::uint64_t>{1, 1}));
}
