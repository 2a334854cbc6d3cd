#include "sectorflow/consumer/nodegroup/frame_assembler.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"

namespace sectorflow::consumer::nodegroup {

FrameAssembler::FrameAssembler(const protocol::Geometry& geometry, std::size_t slots)
    : geometry_(geometry),
      n_sectors_(geometry.n_sectors()),
      rows_in_place_(geometry.sector_cols == geometry.frame_cols) {
  if (geometry.itemsize != sizeof(std::uint16_t)) {
    throw NodeGroupError("detector dtype has " + std::to_string(geometry.itemsize) +
                         " bytes per pixel; NodeGroups count uint16 frames: set [detector] dtype = \"uint16\"");
  }
  if (slots == 0) throw NodeGroupError("the assembly pool needs at least one frame slot");
  slots_.resize(slots);
  free_.reserve(slots);
  for (std::size_t i = slots; i-- > 0;) {
    slots_[i].sectors.resize(n_sectors_);
    slots_[i].have.assign(n_sectors_, 0);
    free_.push_back(i);
  }
  index_.reserve(2 * slots);
  zeros_.assign(std::size_t{geometry.sector_rows} * geometry.sector_cols, 0);
  rows_.resize(geometry.frame_rows);
  gathered_.resize(geometry.frame_pixels());
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

FrameAssembler::Added FrameAssembler::add(std::size_t slot, std::uint32_t sector, zmq::message_t& payload) {
  Slot& s = slots_[slot];
  if (s.have[sector] != 0) return Added::kDuplicate;
  if (reinterpret_cast<std::uintptr_t>(payload.data()) % alignof(std::uint16_t) != 0) {
    // A small message can sit at any offset of ZeroMQ's receive buffer; the counter reads uint16 rows.
    s.sectors[sector] = zmq::message_t(payload.data(), payload.size());
  } else {
    s.sectors[sector].move(payload);
  }
  held_bytes_ += s.sectors[sector].size();
  s.have[sector] = 1;
  ++s.present;
  return s.present == n_sectors_ ? Added::kComplete : Added::kPartial;
}

std::vector<std::uint32_t> FrameAssembler::missing(std::size_t slot) const {
  std::vector<std::uint32_t> out;
  for (std::uint32_t sector = 0; sector < n_sectors_; ++sector) {
    if (!has(slot, sector)) out.push_back(sector);
  }
  return out;
}

void FrameAssembler::release(std::size_t slot) {
  Slot& s = slots_[slot];
  if (!s.used) return;
  index_.erase(key(s.scan, s.frame));
  for (zmq::message_t& message : s.sectors) {
    held_bytes_ -= message.size();
    message.rebuild();  // frees the payload now: an empty message holds nothing
  }
  held_bytes_ -= s.packed.bytes();
  s.packed.clear();
  s.used = false;
  free_.push_back(slot);
}

const std::uint16_t* FrameAssembler::sector_pixels(const Slot& slot, std::uint32_t sector) const {
  const zmq::message_t& message = slot.sectors[sector];
  return message.size() != 0 ? static_cast<const std::uint16_t*>(message.data()) : zeros_.data();
}

const std::uint16_t* const* FrameAssembler::rows(std::size_t slot) {
  const Slot& s = slots_[slot];
  const std::uint32_t sr = geometry_.sector_rows;
  const std::size_t cols = geometry_.frame_cols;
  if (!s.packed.empty()) {
    s.packed.unpack(gathered_.data());
    for (std::uint32_t r = 0; r < geometry_.frame_rows; ++r) rows_[r] = gathered_.data() + r * cols;
  } else if (rows_in_place_) {
    // Sector k holds frame rows k * sector_rows .. (k + 1) * sector_rows - 1, whole.
    for (std::uint32_t r = 0; r < geometry_.frame_rows; ++r) rows_[r] = sector_pixels(s, r / sr) + (r % sr) * cols;
  } else {
    copy(s, gathered_);
    for (std::uint32_t r = 0; r < geometry_.frame_rows; ++r) rows_[r] = gathered_.data() + r * cols;
  }
  return rows_.data();
}

const std::uint16_t* FrameAssembler::sample(std::size_t slot) {
  Slot& s = slots_[slot];
  if (!s.packed.empty()) {
    s.packed.unpack(gathered_.data());
    return gathered_.data();
  }
  copy(s, gathered_);
  s.packed.pack(gathered_.data(), gathered_.size());
  held_bytes_ += s.packed.bytes();
  for (zmq::message_t& message : s.sectors) {
    held_bytes_ -= message.size();
    message.rebuild();
  }
  return gathered_.data();
}

void FrameAssembler::copy(const Slot& s, std::vector<std::uint16_t>& out) const {
  out.resize(geometry_.frame_pixels());
  const std::size_t row_bytes = std::size_t{geometry_.sector_cols} * sizeof(std::uint16_t);
  for (std::uint32_t sector = 0; sector < n_sectors_; ++sector) {
    const std::uint16_t* source = sector_pixels(s, sector);
    std::uint16_t* target =
        out.data() + std::size_t{geometry_.sector_row0(sector)} * geometry_.frame_cols + geometry_.sector_col0(sector);
    for (std::uint32_t row = 0; row < geometry_.sector_rows; ++row) {
      std::memcpy(target + std::size_t{row} * geometry_.frame_cols, source + std::size_t{row} * geometry_.sector_cols,
                  row_bytes);
    }
  }
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

}  // namespace sectorflow::consumer::nodegroup
