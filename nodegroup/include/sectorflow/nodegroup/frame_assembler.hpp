// Assembling frames from their sectors in a bounded pool of preallocated frame buffers.
//
// The pool holds `slots` whole frames (frame_pixels uint16 each) allocated once, in the
// constructor, and reused across frames and scans: memory does not grow with the scan. A slot is
// taken by the first sector of a (scan, frame) and released by the caller once the frame is
// counted. Sectors are copied into their place in the frame (Geometry::sector_row0/col0).
//
// When the pool is full, acquire() returns nothing and the owner decides (the counting thread
// holds the sector back or counts a frame early, see counting_worker.hpp). Not thread-safe: one per counting thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sectorflow/protocol/geometry.hpp"

namespace sectorflow::nodegroup {

class FrameAssembler {
 public:
  enum class Added { kPartial, kComplete, kDuplicate };

  /// Allocates `slots` (>= 1) frames of the geometry. The pixels must be uint16 (itemsize 2).
  FrameAssembler(const protocol::Geometry& geometry, std::size_t slots);

  /// The slot of (scan, frame) if it is being assembled.
  std::optional<std::size_t> find(std::uint32_t scan, std::uint32_t frame) const;
  /// A free slot for (scan, frame) at `position`, or nothing when the pool is full.
  std::optional<std::size_t> acquire(std::uint32_t scan, std::uint32_t frame, std::uint64_t position);
  /// Copies a sector payload (geometry.sector_bytes() bytes) into its place in the slot's frame.
  Added add(std::size_t slot, std::uint32_t sector, const void* payload);
  /// Zeros the pixels of the sectors that did not arrive; returns their indices, ascending.
  std::vector<std::uint32_t> fill_missing(std::size_t slot);
  void release(std::size_t slot);

  /// The slots in use whose scan is `scan`.
  std::vector<std::size_t> slots_of(std::uint32_t scan) const;
  /// The slot in use with the lowest (scan, frame); nothing when the pool is empty.
  std::optional<std::size_t> oldest() const { return extreme(false); }
  /// The slot in use with the highest (scan, frame); nothing when the pool is empty.
  std::optional<std::size_t> newest() const { return extreme(true); }

  const std::uint16_t* pixels(std::size_t slot) const { return slots_[slot].pixels.data(); }
  std::uint32_t scan(std::size_t slot) const { return slots_[slot].scan; }
  std::uint32_t frame(std::size_t slot) const { return slots_[slot].frame; }
  std::uint64_t position(std::size_t slot) const { return slots_[slot].position; }
  bool has(std::size_t slot, std::uint32_t sector) const { return slots_[slot].have[sector] != 0; }
  bool complete(std::size_t slot) const { return slots_[slot].present == n_sectors_; }
  bool used(std::size_t slot) const { return slots_[slot].used; }

  bool full() const { return free_.empty(); }
  std::size_t capacity() const { return slots_.size(); }
  std::size_t in_use() const { return slots_.size() - free_.size(); }
  /// Bytes held by the pool's frame buffers and sector flags (constant after construction).
  std::size_t allocated_bytes() const { return allocated_bytes_; }

 private:
  struct Slot {
    bool used = false;
    std::uint32_t scan = 0;
    std::uint32_t frame = 0;
    std::uint64_t position = 0;
    std::uint32_t present = 0;       // sectors arrived
    std::vector<std::uint8_t> have;  // per sector: arrived
    std::vector<std::uint16_t> pixels;
  };
  static std::uint64_t key(std::uint32_t scan, std::uint32_t frame) { return (std::uint64_t{scan} << 32) | frame; }
  std::optional<std::size_t> extreme(bool highest) const;

  protocol::Geometry geometry_;
  std::uint32_t n_sectors_;
  std::vector<Slot> slots_;
  std::vector<std::size_t> free_;
  std::unordered_map<std::uint64_t, std::size_t> index_;
  std::size_t allocated_bytes_ = 0;
};

}  // namespace sectorflow::nodegroup
