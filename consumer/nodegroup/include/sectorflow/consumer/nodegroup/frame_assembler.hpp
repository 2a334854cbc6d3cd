// Assembling frames from their sectors without copying them: a frame in assembly holds each
// sector's message as it was received (the ZeroMQ message the receiver thread moved here), and the
// counter reads the frame through row pointers into those messages (rows(), count_rows). Memory
// therefore scales with the sectors in flight, not with a pool of whole frames, and each pixel
// crosses DRAM once on its way to the counter instead of twice.
//
// At most `slots` frames are in assembly at once (nodegroup.pool_frames split over the counting
// threads): a slot is taken by the first sector of a (scan, frame) and released, with its
// messages, by the caller once the frame is counted. When all are taken, acquire() returns nothing
// and the owner decides (the counting thread holds the sector back or counts a frame early, see
// counting_worker.hpp). A missing sector reads as zeros (one shared zero sector).
//
// Rows: with sectors as wide as the frame (the 4D Camera's), every row lies whole in one sector and
// rows() points into the messages. With narrower sectors a row spans several, and rows() gathers
// the frame into one scratch buffer first (one copy, at count time). Not thread-safe: one per
// counting thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "sectorflow/consumer/nodegroup/packed_frame.hpp"
#include "sectorflow/protocol/geometry.hpp"

namespace sectorflow::consumer::nodegroup {

class FrameAssembler {
 public:
  enum class Added { kPartial, kComplete, kDuplicate };

  /// Room for `slots` (>= 1) frames of the geometry. The pixels must be uint16 (itemsize 2).
  FrameAssembler(const protocol::Geometry& geometry, std::size_t slots);

  /// The slot of (scan, frame) if it is being assembled.
  std::optional<std::size_t> find(std::uint32_t scan, std::uint32_t frame) const;
  /// A free slot for (scan, frame) at `position`, or nothing when every slot is taken.
  std::optional<std::size_t> acquire(std::uint32_t scan, std::uint32_t frame, std::uint64_t position);
  /// Takes a sector's payload (geometry.sector_bytes() bytes) into the slot's frame, by moving the
  /// message, not its pixels (a payload not 2-byte aligned is copied once, so rows are aligned).
  /// A duplicate leaves `payload` as it was.
  Added add(std::size_t slot, std::uint32_t sector, zmq::message_t& payload);
  /// The sectors that did not arrive, ascending (they read as zeros).
  std::vector<std::uint32_t> missing(std::size_t slot) const;
  /// Releases the slot and the messages it holds.
  void release(std::size_t slot);

  /// Row pointers of the slot's frame, geometry.frame_rows of them, valid until the next call of
  /// rows() or the slot's release.
  const std::uint16_t* const* rows(std::size_t slot);
  /// The slot's frame for the threshold sample, whole in a scratch buffer valid until the next call
  /// of rows() or sample(). The frame stays with the slot packed (packed_frame.hpp) and its messages
  /// are let go, so a frame waiting for the thresholds holds about half its bytes; rows() unpacks it.
  const std::uint16_t* sample(std::size_t slot);

  /// The slots in use whose scan is `scan`.
  std::vector<std::size_t> slots_of(std::uint32_t scan) const;
  /// The slot in use with the lowest (scan, frame); nothing when none is in use.
  std::optional<std::size_t> oldest() const { return extreme(false); }
  /// The slot in use with the highest (scan, frame); nothing when none is in use.
  std::optional<std::size_t> newest() const { return extreme(true); }

  std::uint32_t scan(std::size_t slot) const { return slots_[slot].scan; }
  std::uint32_t frame(std::size_t slot) const { return slots_[slot].frame; }
  std::uint64_t position(std::size_t slot) const { return slots_[slot].position; }
  bool has(std::size_t slot, std::uint32_t sector) const { return slots_[slot].have[sector] != 0; }
  bool complete(std::size_t slot) const { return slots_[slot].present == n_sectors_; }
  bool used(std::size_t slot) const { return slots_[slot].used; }

  bool full() const { return free_.empty(); }
  std::size_t capacity() const { return slots_.size(); }
  std::size_t in_use() const { return slots_.size() - free_.size(); }
  /// Payload bytes the frames in assembly hold now (packed sample frames included).
  std::size_t held_bytes() const { return held_bytes_; }

 private:
  struct Slot {
    bool used = false;
    std::uint32_t scan = 0;
    std::uint32_t frame = 0;
    std::uint64_t position = 0;
    std::uint32_t present = 0;               // sectors arrived
    std::vector<std::uint8_t> have;          // per sector: arrived
    std::vector<zmq::message_t> sectors;     // per sector: its payload (empty until it arrives, or once packed)
    PackedFrame packed;                      // sample()'s copy, empty unless the frame is a sample
  };
  static std::uint64_t key(std::uint32_t scan, std::uint32_t frame) { return (std::uint64_t{scan} << 32) | frame; }
  std::optional<std::size_t> extreme(bool highest) const;
  /// Where the sector's pixels are: its payload, or the zero sector.
  const std::uint16_t* sector_pixels(const Slot& slot, std::uint32_t sector) const;
  void copy(const Slot& slot, std::vector<std::uint16_t>& out) const;

  protocol::Geometry geometry_;
  std::uint32_t n_sectors_;
  bool rows_in_place_;                        // sectors as wide as the frame
  std::vector<Slot> slots_;
  std::vector<std::size_t> free_;
  std::unordered_map<std::uint64_t, std::size_t> index_;
  std::vector<std::uint16_t> zeros_;          // one sector of zeros: a missing sector's pixels
  std::vector<const std::uint16_t*> rows_;    // rows()'s result
  std::vector<std::uint16_t> gathered_;       // rows()'s frame when not read in place, sample()'s frame
  std::size_t held_bytes_ = 0;
};

}  // namespace sectorflow::consumer::nodegroup
