// A frame kept compactly while it waits to be counted as part of the threshold sample (the largest
// thing a NodeGroup holds before a scan's thresholds are decided: threshold_sample_frames frames).
// Dark-noise pixels lie within a few ADU of each other, so each pixel is kept as one byte above the
// frame's smallest value, and the few that do not fit (electrons, hot pixels) are listed exactly.
// Lossless: unpack() gives back every pixel. A frame whose pixels do not fit that way (more than
// one in six would be listed) is kept as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sectorflow::consumer::nodegroup {

class PackedFrame {
 public:
  /// Keeps `pixels` pixels of `frame` (replacing what was kept).
  void pack(const std::uint16_t* frame, std::size_t pixels);
  /// Writes the kept pixels to `out` (as many as were packed).
  void unpack(std::uint16_t* out) const;
  /// Frees what is kept.
  void clear();
  bool empty() const { return pixels_ == 0; }
  /// Bytes held for the pixels.
  std::size_t bytes() const;

 private:
  static constexpr std::uint8_t kListed = 255;  // the low byte of a pixel kept in listed_

  std::size_t pixels_ = 0;
  std::uint16_t base_ = 0;
  std::vector<std::uint8_t> low_;          // pixel - base_, or kListed
  std::vector<std::uint32_t> listed_at_;   // pixels at or above base_ + kListed: where
  std::vector<std::uint16_t> listed_;      // and their values
  std::vector<std::uint16_t> plain_;       // the frame as it is, when packing does not pay
};

}  // namespace sectorflow::consumer::nodegroup
