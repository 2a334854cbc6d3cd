#include "sectorflow/consumer/nodegroup/packed_frame.hpp"

#include <algorithm>
#include <cstring>

namespace sectorflow::consumer::nodegroup {

void PackedFrame::pack(const std::uint16_t* frame, std::size_t pixels) {
  clear();
  pixels_ = pixels;
  if (pixels == 0) return;
  base_ = *std::min_element(frame, frame + pixels);
  const std::size_t listed = static_cast<std::size_t>(
      std::count_if(frame, frame + pixels, [this](std::uint16_t v) { return v - base_ >= kListed; }));
  // A listed pixel costs 7 bytes (its byte, index and value) against 2 kept plainly.
  if (listed > pixels / 6) {
    plain_.assign(frame, frame + pixels);
    return;
  }
  low_.resize(pixels);
  listed_at_.reserve(listed);
  listed_.reserve(listed);
  for (std::size_t i = 0; i < pixels; ++i) {
    const auto above = static_cast<unsigned>(frame[i] - base_);
    if (above >= kListed) {
      low_[i] = kListed;
      listed_at_.push_back(static_cast<std::uint32_t>(i));
      listed_.push_back(frame[i]);
    } else {
      low_[i] = static_cast<std::uint8_t>(above);
    }
  }
}

void PackedFrame::unpack(std::uint16_t* out) const {
  if (!plain_.empty()) {
    std::memcpy(out, plain_.data(), pixels_ * sizeof(std::uint16_t));
    return;
  }
  for (std::size_t i = 0; i < low_.size(); ++i) out[i] = static_cast<std::uint16_t>(base_ + low_[i]);
  for (std::size_t k = 0; k < listed_at_.size(); ++k) out[listed_at_[k]] = listed_[k];
}

void PackedFrame::clear() {
  pixels_ = 0;
  std::vector<std::uint8_t>().swap(low_);
  std::vector<std::uint32_t>().swap(listed_at_);
  std::vector<std::uint16_t>().swap(listed_);
  std::vector<std::uint16_t>().swap(plain_);
}

std::size_t PackedFrame::bytes() const {
  return low_.size() + listed_at_.size() * sizeof(std::uint32_t) + listed_.size() * sizeof(std::uint16_t) +
         plain_.size() * sizeof(std::uint16_t);
}

}  // namespace sectorflow::consumer::nodegroup
