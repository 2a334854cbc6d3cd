// The relay's table of open scans: bounded, and making room closes the scan opened first (by
// arrival, not by number), never the one being opened. A relay once erased the entry it had just
// created when an info for a lower scan number came with the table full, and then used it.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scan_table.hpp"

namespace sa = sectorflow::aggregator::detail;
namespace sp = sectorflow::protocol;

namespace {

sa::ScanState scan(std::uint32_t number) {
  sp::InfoMessage info;
  info.scan_number = number;
  info.scan_x = 4;
  info.scan_y = 4;
  info.routing = {"ng-a"};
  info.counts = {{"ng-a", 16}};
  return sa::ScanState(info, 1, std::chrono::steady_clock::now());
}

}  // namespace

TEST(ScanTable, OpeningALowerNumberWhenFullClosesTheOldestArrivalNotTheNewScan) {
  sa::ScanTable table(3);
  for (const std::uint32_t number : {20U, 21U, 22U}) EXPECT_FALSE(table.open(scan(number)).has_value());
  const std::optional<sa::ScanState> evicted = table.open(scan(5));
  ASSERT_TRUE(evicted.has_value());
  EXPECT_EQ(evicted->scan_number(), 20U);
  ASSERT_NE(table.find(5), nullptr);
  EXPECT_EQ(table.find(5)->scan_number(), 5U);
  EXPECT_EQ(table.find(20), nullptr);
  EXPECT_EQ(table.size(), 3U);
}

TEST(ScanTable, ArrivalOrderIsKeptAcrossClosesAndReopens) {
  sa::ScanTable table(2);
  (void)table.open(scan(1));
  (void)table.open(scan(2));
  (void)table.close(1);
  (void)table.open(scan(1));  // reopened: now the newest
  const std::optional<sa::ScanState> evicted = table.open(scan(3));
  ASSERT_TRUE(evicted.has_value());
  EXPECT_EQ(evicted->scan_number(), 2U);
  std::vector<std::uint32_t> open;
  table.for_each([&open](sa::ScanState& s) { open.push_back(s.scan_number()); });
  EXPECT_EQ(open, (std::vector<std::uint32_t>{1, 3}));
}

TEST(ScanTable, ATableOfOneAlwaysHoldsTheLatestScan) {
  sa::ScanTable table(1);
  for (std::uint32_t number = 100; number > 90; --number) {
    (void)table.open(scan(number));
    ASSERT_NE(table.find(number), nullptr);
    EXPECT_EQ(table.size(), 1U);
  }
}
