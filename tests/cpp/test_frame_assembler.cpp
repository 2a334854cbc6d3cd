// The NodeGroup's assembly of frames from received sectors: the messages are held, not copied,
// and the frame reads in place through row pointers (sectors as wide as the frame) or gathered
// (narrower sectors); a full pool refuses new frames, the oldest and newest frames are found for
// the counting thread's forced choice, lost sectors read as zeros, and held bytes go back to zero.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <zmq.hpp>

#include "sectorflow/consumer/nodegroup/frame_assembler.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"

namespace sc = sectorflow::consumer::nodegroup;

namespace {

// 4 x 2 pixels in two sectors of 2 x 2, side by side: sector 1 starts at column 2.
sectorflow::protocol::Geometry side_by_side() { return {2, 4, 2, 2, 2}; }
// 2 x 4 pixels in two sectors of 1 x 4, one above the other: the 4D Camera's tiling.
sectorflow::protocol::Geometry stacked() { return {2, 4, 1, 4, 2}; }
// The same with rows of 64 bytes: larger than a message ZeroMQ keeps inside the message object.
sectorflow::protocol::Geometry stacked_wide() { return {2, 32, 1, 32, 2}; }

zmq::message_t sector_of(std::uint16_t value, std::size_t pixels = 4) {
  const std::vector<std::uint16_t> values(pixels, value);
  return zmq::message_t(values.data(), values.size() * sizeof(std::uint16_t));
}

std::vector<std::uint16_t> frame_of(const std::uint16_t* const* rows, std::size_t n_rows, std::size_t cols) {
  std::vector<std::uint16_t> out;
  for (std::size_t r = 0; r < n_rows; ++r) out.insert(out.end(), rows[r], rows[r] + cols);
  return out;
}

}  // namespace

TEST(FrameAssembler, SectorsAreHeldNotCopiedAndRowsReadInPlace) {
  sc::FrameAssembler pool(stacked_wide(), 2);
  const auto slot = pool.acquire(1, 10, 5);
  ASSERT_TRUE(slot);
  zmq::message_t second = sector_of(7, 32);
  const void* pixels = second.data();
  EXPECT_EQ(pool.add(*slot, 1, second), sc::FrameAssembler::Added::kPartial);
  EXPECT_EQ(second.size(), 0u) << "the message moved into the frame";
  zmq::message_t again = sector_of(9, 32);
  EXPECT_EQ(pool.add(*slot, 1, again), sc::FrameAssembler::Added::kDuplicate);
  EXPECT_EQ(again.size(), 64u) << "a duplicate is left to the caller";
  zmq::message_t first = sector_of(3, 32);
  EXPECT_EQ(pool.add(*slot, 0, first), sc::FrameAssembler::Added::kComplete);
  const std::uint16_t* const* rows = pool.rows(*slot);
  EXPECT_EQ(static_cast<const void*>(rows[1]), pixels) << "row 1 is read where it was received";
  std::vector<std::uint16_t> expected(32, 3);
  expected.insert(expected.end(), 32, 7);
  EXPECT_EQ(frame_of(rows, 2, 32), expected);
  EXPECT_EQ(pool.held_bytes(), 128u);
  EXPECT_EQ(pool.position(*slot), 5u);
  EXPECT_EQ(pool.find(1, 10), slot);
  pool.release(*slot);
  EXPECT_EQ(pool.held_bytes(), 0u);
}

TEST(FrameAssembler, NarrowSectorsAreGatheredIntoTheirPlace) {
  sc::FrameAssembler pool(side_by_side(), 1);
  const auto slot = pool.acquire(1, 10, 5);
  zmq::message_t right = sector_of(7);
  zmq::message_t left = sector_of(3);
  pool.add(*slot, 1, right);
  EXPECT_EQ(pool.add(*slot, 0, left), sc::FrameAssembler::Added::kComplete);
  EXPECT_EQ(frame_of(pool.rows(*slot), 2, 4), (std::vector<std::uint16_t>{3, 3, 7, 7, 3, 3, 7, 7}));
  const std::uint16_t* whole = pool.sample(*slot);
  EXPECT_EQ(std::vector<std::uint16_t>(whole, whole + 8), (std::vector<std::uint16_t>{3, 3, 7, 7, 3, 3, 7, 7}));
  EXPECT_EQ(pool.held_bytes(), 8u) << "one byte per pixel, packed: the sectors' messages were let go";
  EXPECT_TRUE(pool.has(*slot, 0) && pool.has(*slot, 1));
  EXPECT_EQ(frame_of(pool.rows(*slot), 2, 4), (std::vector<std::uint16_t>{3, 3, 7, 7, 3, 3, 7, 7}));
  pool.release(*slot);
  EXPECT_EQ(pool.held_bytes(), 0u);
}

TEST(FrameAssembler, AMisalignedPayloadIsCopiedOnceSoRowsAreAligned) {
  sc::FrameAssembler pool(stacked(), 1);
  const auto slot = pool.acquire(1, 0, 0);
  // A sector at an odd offset of a larger buffer, as ZeroMQ may hand a small message.
  std::vector<unsigned char> buffer(9, 0);
  const std::uint16_t value = 0x0102;
  for (int i = 0; i < 4; ++i) std::memcpy(buffer.data() + 1 + 2 * i, &value, sizeof value);
  zmq::message_t odd(buffer.data() + 1, 8, [](void*, void*) {}, nullptr);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(odd.data()) % 2, 1u);
  pool.add(*slot, 0, odd);
  const std::uint16_t* const* rows = pool.rows(*slot);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(rows[0]) % alignof(std::uint16_t), 0u);
  EXPECT_EQ(frame_of(rows, 1, 4), (std::vector<std::uint16_t>(4, 0x0102)));
}

TEST(FrameAssembler, FullPoolRefusesUntilASlotIsReleased) {
  sc::FrameAssembler pool(side_by_side(), 2);
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
  sc::FrameAssembler pool(side_by_side(), 3);
  EXPECT_FALSE(pool.oldest());
  const auto later_scan = pool.acquire(2, 0, 0);
  const auto high_frame = pool.acquire(1, 900, 900);
  const auto low_frame = pool.acquire(1, 3, 3);
  EXPECT_EQ(pool.oldest(), low_frame);
  EXPECT_EQ(pool.newest(), later_scan);
  pool.release(*later_scan);
  EXPECT_EQ(pool.newest(), high_frame);
}

TEST(FrameAssembler, MissingSectorsReadAsZerosAndAreNamed) {
  sc::FrameAssembler pool(stacked(), 1);
  const auto first = pool.acquire(1, 0, 0);
  zmq::message_t four = sector_of(4);
  zmq::message_t six = sector_of(6);
  pool.add(*first, 0, four);
  pool.add(*first, 1, six);
  pool.release(*first);
  // The reused slot must not show the previous frame's sector 1.
  const auto slot = pool.acquire(1, 1, 1);
  zmq::message_t five = sector_of(5);
  pool.add(*slot, 0, five);
  EXPECT_EQ(pool.missing(*slot), std::vector<std::uint32_t>{1});
  EXPECT_EQ(frame_of(pool.rows(*slot), 2, 4), (std::vector<std::uint16_t>{5, 5, 5, 5, 0, 0, 0, 0}));
}

TEST(FrameAssembler, RefusesAnEmptyPoolAndWidePixels) {
  EXPECT_THROW(sc::FrameAssembler(side_by_side(), 0), sc::NodeGroupError);
  auto wide = side_by_side();
  wide.itemsize = 4;
  EXPECT_THROW(sc::FrameAssembler(wide, 1), sc::NodeGroupError);
}

TEST(PackedFrame, DarkNoiseTakesAByteAPixelAndEveryPixelComesBack) {
  // Dark noise around 20 ADU with electrons far above it and one pixel at the frame's minimum.
  std::vector<std::uint16_t> frame(1000);
  for (std::size_t i = 0; i < frame.size(); ++i) frame[i] = static_cast<std::uint16_t>(15 + (i * 7919) % 12);
  frame[3] = 2;
  frame[500] = 65535;
  frame[501] = 2 + 255;  // the first value that no longer fits a byte above the minimum
  frame[502] = 2 + 254;  // the last that does
  sc::PackedFrame packed;
  packed.pack(frame.data(), frame.size());
  EXPECT_EQ(packed.bytes(), 1000u + 2 * (4 + 2)) << "a byte per pixel plus two listed pixels";
  std::vector<std::uint16_t> back(frame.size(), 0);
  packed.unpack(back.data());
  EXPECT_EQ(back, frame);
  packed.clear();
  EXPECT_TRUE(packed.empty());
  EXPECT_EQ(packed.bytes(), 0u);
}

TEST(PackedFrame, AFrameThatDoesNotPackIsKeptAsItIs) {
  std::vector<std::uint16_t> frame(600);
  for (std::size_t i = 0; i < frame.size(); ++i) frame[i] = static_cast<std::uint16_t>(i % 2 ? 40000 : 10);
  sc::PackedFrame packed;
  packed.pack(frame.data(), frame.size());
  EXPECT_EQ(packed.bytes(), 1200u) << "half the pixels far apart: two bytes each, not seven";
  std::vector<std::uint16_t> back(frame.size(), 0);
  packed.unpack(back.data());
  EXPECT_EQ(back, frame);
}
