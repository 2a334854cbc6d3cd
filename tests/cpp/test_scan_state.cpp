// One relay thread's state of a scan: a NodeGroup declared dead is no longer awaited, the relay
// record counts forwarded and lost per NodeGroup of the routing list and names the dead one, and a
// scan rebuilt from the producers' scan records takes each thread's own info, queued while the
// relay restarted, as heard already, while a different one is still refused.
#include <chrono>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "scan_state.hpp"

namespace sa = sectorflow::aggregator::detail;
namespace sp = sectorflow::protocol;

namespace {

sp::InfoMessage info(std::uint32_t thread, std::uint64_t to_a, std::uint64_t to_b) {
  sp::InfoMessage m;
  m.scan_number = 9;
  m.thread_id = thread;
  m.scan_x = 4;
  m.scan_y = 4;
  m.routing = {"ng-a", "ng-b"};
  m.counts = {{"ng-a", to_a}, {"ng-b", to_b}};
  return m;
}

}  // namespace

TEST(ScanState, ADeadNodeGroupIsNotAwaitedAndTheRecordNamesIt) {
  sa::ScanState scan(info(0, 8, 8), 1, std::chrono::steady_clock::now());
  ASSERT_EQ(scan.add_info(info(0, 8, 8)), "");
  sa::Target& a = *scan.target("ng-a");
  sa::Target& b = *scan.target("ng-b");
  for (int i = 0; i < 8; ++i) scan.forwarded(a, 10);
  for (int i = 0; i < 3; ++i) scan.forwarded(b, 10);
  scan.lost(b);
  EXPECT_FALSE(scan.complete());
  EXPECT_TRUE(scan.declare_dead(b, "blocked"));
  EXPECT_FALSE(scan.declare_dead(b, "again"));
  EXPECT_TRUE(scan.complete());

  const sp::RelayScanRecord interim = scan.record(2, false);
  EXPECT_FALSE(interim.complete);
  const sp::RelayScanRecord record = scan.record(2, true);
  EXPECT_EQ(record.thread, 2U);
  EXPECT_TRUE(record.complete);
  EXPECT_EQ(record.forwarded, (std::map<std::string, std::uint64_t>{{"ng-a", 8}, {"ng-b", 3}}));
  EXPECT_EQ(record.lost, (std::map<std::string, std::uint64_t>{{"ng-a", 0}, {"ng-b", 1}}));
  EXPECT_EQ(record.dead, (std::vector<std::string>{"ng-b"}));
  EXPECT_EQ(sp::RelayScanRecord::decode(record.encode()), record);
  const sectorflow::aggregator::ScanSummary summary = scan.summary(2, true);
  EXPECT_EQ(summary.dead.at("ng-b"), "blocked");
}

TEST(ScanState, ARebuiltScanTakesTheSameInfoAsHeardAndRefusesAnother) {
  sa::ScanState scan(info(0, 4, 4), 2, std::chrono::steady_clock::now());
  ASSERT_EQ(scan.add_info(info(0, 4, 4), true), "");
  scan.mark_recovered();
  EXPECT_EQ(scan.add_info(info(0, 4, 4)), "");  // the thread's own info, queued across the restart
  EXPECT_EQ(scan.infos(), 1U);
  EXPECT_NE(scan.add_info(info(0, 5, 3)), "");  // another count for the same thread
  ASSERT_EQ(scan.add_info(info(1, 4, 4)), "");
  EXPECT_TRUE(scan.infos_complete());
  EXPECT_EQ(scan.target("ng-a")->expected, 8U);
  EXPECT_NE(scan.add_info(info(1, 4, 4)), "");  // a thread heard through its info, not a record
  EXPECT_TRUE(scan.summary(0, true).recovered);
}

TEST(ScanState, ANativeScanCompletesWhenEveryThreadSentWhatItAnnounced) {
  sa::ScanState scan = sa::ScanState::native(9, 4, 4, {"ng-a", "ng-b"}, 2, std::chrono::steady_clock::now());
  ASSERT_TRUE(scan.is_native());
  sa::Target& a = *scan.target("ng-a");
  sa::Target& b = *scan.target("ng-b");
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(scan.native_arrival(0, 3), "");
    scan.forwarded(i % 2 == 0 ? a : b, 10);
  }
  EXPECT_FALSE(scan.complete()) << "thread 1 has not been heard from";
  ASSERT_EQ(scan.native_arrival(1, 2), "");
  scan.forwarded(a, 10);
  EXPECT_FALSE(scan.complete()) << "thread 1 announced 2 and sent 1";
  ASSERT_EQ(scan.native_arrival(1, 2), "");
  scan.forwarded(b, 10);
  EXPECT_TRUE(scan.complete());
  EXPECT_EQ(scan.record(0, true).forwarded.at("ng-a"), 3u);
  EXPECT_TRUE(scan.record(0, true).complete);
}

// A tier member that a native thread sends nothing (its producer record says so) completes without it.
TEST(ScanState, ANativeThreadSilentTowardsThisMemberIsHeardWithNothingToCome) {
  sa::ScanState scan = sa::ScanState::native(9, 4, 4, {"ng-a"}, 2, std::chrono::steady_clock::now());
  sa::Target& a = *scan.target("ng-a");
  ASSERT_EQ(scan.native_arrival(0, 1), "");
  scan.forwarded(a, 10);
  EXPECT_FALSE(scan.complete()) << "thread 1 not heard from";
  scan.native_silent(1);
  scan.native_silent(1);  // again: changes nothing
  scan.native_silent(7);  // no such thread: ignored
  EXPECT_TRUE(scan.infos_complete());
  EXPECT_TRUE(scan.complete());
  EXPECT_EQ(scan.announced(), 1u);
  // Its producer record was wrong and it sends after all: what it announces is awaited, once.
  ASSERT_EQ(scan.native_arrival(1, 2), "");
  EXPECT_TRUE(scan.infos_complete());
  EXPECT_FALSE(scan.complete());
  ASSERT_EQ(scan.native_arrival(1, 2), "");
  EXPECT_TRUE(scan.complete());
}

TEST(ScanState, ANativeThreadAnnouncingAnotherCountIsRefusedAndTheClosingCountsAreWhatWasForwarded) {
  sa::ScanState scan = sa::ScanState::native(9, 4, 4, {"ng-a", "ng-b"}, 2, std::chrono::steady_clock::now());
  sa::Target& a = *scan.target("ng-a");
  sa::Target& b = *scan.target("ng-b");
  ASSERT_EQ(scan.native_arrival(0, 2), "");
  scan.forwarded(a, 10);
  const std::string refused = scan.native_arrival(0, 3);
  EXPECT_NE(refused.find("num_frames_this_thread 3 differs from the 2 its first header gave"), std::string::npos)
      << refused;
  ASSERT_EQ(scan.native_arrival(0, 2), "");
  scan.lost(b);
  ASSERT_EQ(scan.native_arrival(1, 1), "");
  scan.forwarded(b, 10);
  EXPECT_TRUE(scan.complete());
  EXPECT_EQ(scan.announced(), 3u);
  scan.closing_counts();
  EXPECT_EQ(scan.expected_info(a, 2).counts.at("ng-a"), 1u);
  EXPECT_EQ(scan.expected_info(b, 2).counts.at("ng-b"), 1u) << "the lost message is not announced";
}

TEST(ScanState, ANativeScanWithoutNodeGroupsCountsItsMessagesLost) {
  sa::ScanState scan = sa::ScanState::native(9, 4, 4, {}, 1, std::chrono::steady_clock::now());
  EXPECT_FALSE(scan.routable());
  ASSERT_EQ(scan.native_arrival(0, 1), "");
  scan.lost_unrouted();
  EXPECT_TRUE(scan.complete());
  EXPECT_EQ(scan.summary(0, true).lost, 1u);
}
