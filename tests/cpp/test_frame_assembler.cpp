// The NodeGroup's assembly pool: sectors land in their place, a full pool refuses new frames, the
// oldest and newest frames are found for the counting thread's forced choice, lost sectors are zeros.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sectorflow/nodegroup/frame_assembler.hpp"
#include "sectorflow/nodegroup/nodegroup_error.hpp"

namespace sc = sectorflow::nodegroup;

namespace {

// 4 x 2 pixels in two sectors of 2 x 2, side by side: sector 1 starts at column 2.
sectorflow::protocol::Geometry small() { return {2, 4, 2, 2, 2}; }

std::vector<std::uint16_t> sector_of(std::uint16_t value) { return std::vector<std::uint16_t>(4, value); }

}  // namespace

TEST(FrameAssembler, SectorsLandInPlaceAndCompleteTheFrame) {
  sc::FrameAssembler pool(small(), 2);
  const auto slot = pool.acquire(1, 10, 5);
  ASSERT_TRUE(slot);
  EXPECT_EQ(pool.add(*slot, 1, sector_of(7).data()), sc::FrameAssembler::Added::kPartial);
  EXPECT_EQ(pool.add(*slot, 1, sector_of(9).data()), sc::FrameAssembler::Added::kDuplicate);
  EXPECT_EQ(pool.add(*slot, 0, sector_of(3).data()), sc::FrameAssembler::Added::kComplete);
  const std::uint16_t* pixels = pool.pixels(*slot);
  EXPECT_EQ(std::vector<std::uint16_t>(pixels, pixels + 8), (std::vector<std::uint16_t>{3, 3, 7, 7, 3, 3, 7, 7}));
  EXPECT_EQ(pool.position(*slot), 5u);
  EXPECT_EQ(pool.find(1, 10), slot);
}

TEST(FrameAssembler, FullPoolRefusesUntilASlotIsReleased) {
  sc::FrameAssembler pool(small(), 2);
  const auto a = pool.acquire(1, 0, 0);
  const auto b = pool.acquire(1, 1, 1);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(pool.full());
  EXPECT_FALSE(pool.acquire(1, 2, 2));
  pool.release(*a);
  EXPECT_FALSE(pool.find(1, 0));
  EXPECT_TRUE(pool.acquire(1, 2, 2));
  EXPECT_EQ(pool.in_use(), 2u);
}

TEST(FrameAssembler, OldestAndNewestOrderByScanThenFrame) {
  sc::FrameAssembler pool(small(), 3);
  EXPECT_FALSE(pool.oldest());
  const auto later_scan = pool.acquire(2, 0, 0);
  const auto high_frame = pool.acquire(1, 900, 900);
  const auto low_frame = pool.acquire(1, 3, 3);
  EXPECT_EQ(pool.oldest(), low_frame);
  EXPECT_EQ(pool.newest(), later_scan);
  pool.release(*later_scan);
  EXPECT_EQ(pool.newest(), high_frame);
}

TEST(FrameAssembler, MissingSectorsAreZerosAndNamed) {
  sc::FrameAssembler pool(small(), 1);
  const auto first = pool.acquire(1, 0, 0);
  pool.add(*first, 0, sector_of(4).data());
  pool.add(*first, 1, sector_of(6).data());
  pool.release(*first);
  // The reused slot must not show the previous frame's sector 1.
  const auto slot = pool.acquire(1, 1, 1);
  pool.add(*slot, 0, sector_of(5).data());
  EXPECT_EQ(pool.fill_missing(*slot), std::vector<std::uint32_t>{1});
  const std::uint16_t* pixels = pool.pixels(*slot);
  EXPECT_EQ(std::vector<std::uint16_t>(pixels, pixels + 8), (std::vector<std::uint16_t>{5, 5, 0, 0, 5, 5, 0, 0}));
}

TEST(FrameAssembler, RefusesAnEmptyPoolAndWidePixels) {
  EXPECT_THROW(sc::FrameAssembler(small(), 0), sc::NodeGroupError);
  auto wide = small();
  wide.itemsize = 4;
  EXPECT_THROW(sc::FrameAssembler(wide, 1), sc::NodeGroupError);
}
