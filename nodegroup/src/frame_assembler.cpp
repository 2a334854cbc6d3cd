#include "sectorflow/nodegroup/frame_assembler.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "sectorflow/nodegroup/nodegroup_error.hpp"

namespace sectorflow::nodegroup {

FrameAssembler::FrameAssembler(const protocol::Geometry& geometry, std::size_t slots)
    : geometry_(geometry), n_sectors_(geometry.n_sectors()) {
  if (geometry.itemsize != sizeof(std::uint16_t)) {
    throw NodeGroupError("detector dtype has " + std::to_string(geometry.itemsize) +
                         " bytes per pixel; NodeGroups count uint16 frames: set [detector] dtype = \"uint16\"");
  }
  if (slots == 0) throw NodeGroupError("the assembly pool needs at least one frame slot");
  slots_.resize(slots);
  free_.reserve(slots);
  for (std::size_t i = slots; i-- > 0;) {
    slots_[i].have.assign(n_sectors_, 0);
    slots_[i].pixels.assign(geometry.frame_pixels(), 0);
    free_.push_back(i);
    allocated_bytes_ += slots_[i].have.capacity() + slots_[i].pixels.capacity() * sizeof(std::uint16_t);
  }
  index_.reserve(2 * slots);
}

std::optional<std::size_t> FrameAssembler::find(std::uint32_t scan, std::uint32_t frame) const {
  const auto it = index_.find(key(scan, frame));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::size_t> FrameAssembler::acquire(std::uint32_t scan, std::uint32_t frame, std::uint64_t position) {
  if (free_.empty()) return std::nullopt;
  const std::size_t i = free_.back();
  free_.pop_back();
  Slot& s = slots_[i];
  s.used = true;
  s.scan = scan;
  s.frame = frame;
  s.position = position;
  s.present = 0;
  std::fill(s.have.begin(), s.have.end(), std::uint8_t{0});
  index_.emplace(key(scan, frame), i);
  return i;
}

FrameAssembler::Added FrameAssembler::add(std::size_t slot, std::uint32_t sector, const void* payload) {
  Slot& s = slots_[slot];
  if (s.have[sector]) return Added::kDuplicate;
  s.have[sector] = 1;
  ++s.present;
  const std::size_t row_bytes = std::size_t{geometry_.sector_cols} * sizeof(std::uint16_t);
  const auto* source = static_cast<const unsigned char*>(payload);
  std::uint16_t* target =
      s.pixels.data() + std::size_t{geometry_.sector_row0(sector)} * geometry_.frame_cols + geometry_.sector_col0(sector);
  for (std::uint32_t row = 0; row < geometry_.sector_rows; ++row) {
    std::memcpy(target + std::size_t{row} * geometry_.frame_cols, source + row * row_bytes, row_bytes);
  }
  return s.present == n_sectors_ ? Added::kComplete : Added::kPartial;
}

std::vector<std::uint32_t> FrameAssembler::fill_missing(std::size_t slot) {
  Slot& s = slots_[slot];
  std::vector<std::uint32_t> missing;
  for (std::uint32_t sector = 0; sector < n_sectors_; ++sector) {
    if (s.have[sector]) continue;
    missing.push_back(sector);
    std::uint16_t* target = s.pixels.data() + std::size_t{geometry_.sector_row0(sector)} * geometry_.frame_cols +
                            geometry_.sector_col0(sector);
    for (std::uint32_t row = 0; row < geometry_.sector_rows; ++row) {
      std::fill_n(target + std::size_t{row} * geometry_.frame_cols, geometry_.sector_cols, std::uint16_t{0});
    }
  }
  return missing;
}

void FrameAssembler::release(std::size_t slot) {
  Slot& s = slots_[slot];
  if (!s.used) return;
  index_.erase(key(s.scan, s.frame));
  s.used = false;
  free_.push_back(slot);
}

std::vector<std::size_t> FrameAssembler::slots_of(std::uint32_t scan) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].used && slots_[i].scan == scan) out.push_back(i);
  }
  return out;
}

std::optional<std::size_t> FrameAssembler::extreme(bool highest) const {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].used) continue;
    const std::uint64_t k = key(slots_[i].scan, slots_[i].frame);
    if (!best) {
      best = i;
      continue;
    }
    const std::uint64_t b = key(slots_[*best].scan, slots_[*best].frame);
    if (highest ? k > b : k < b) best = i;
  }
  return best;
}

}  // namespace sectorflow::nodegroup
