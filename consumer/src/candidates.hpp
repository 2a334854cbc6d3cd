// Finding the pixels that survived thresholding (candidates for a maximum) in a padded frame.
// Internal to the electron counter; shared by its plain and row-dark passes.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "sectorflow/consumer/frame_shape.hpp"

namespace sectorflow::consumer {

/// Appends base + c for every nonzero out[c], c < cols. Almost every pixel is zero, so eight
/// bytes are tested at once and only a nonzero word is looked into.
template <typename Pixel>
inline void append_row_candidates(const Pixel* out, std::uint32_t cols, std::uint32_t base,
                                  std::vector<std::uint32_t>& candidates) {
  constexpr std::uint32_t kPerWord = sizeof(std::uint64_t) / sizeof(Pixel);
  std::uint32_t c = 0;
  for (; c + kPerWord <= cols; c += kPerWord) {
    std::uint64_t word;  // for floats: +0.0f is the only zero a zeroed pixel holds
    std::memcpy(&word, out + c, sizeof word);
    if (word != 0) {
      for (std::uint32_t k = c; k < c + kPerWord; ++k) {
        if (out[k] != Pixel{0}) {
          candidates.push_back(base + k);
        }
      }
    }
  }
  for (; c < cols; ++c) {
    if (out[c] != Pixel{0}) {
      candidates.push_back(base + c);
    }
  }
}

/// Appends the padded index of every pixel of the frame.
inline void append_every_pixel(const FrameShape& shape, std::size_t stride, std::vector<std::uint32_t>& candidates) {
  for (std::uint32_t r = 0; r < shape.rows; ++r) {
    const auto base = static_cast<std::uint32_t>((std::size_t{r} + 1) * stride + 1);
    for (std::uint32_t c = 0; c < shape.cols; ++c) {
      candidates.push_back(base + c);
    }
  }
}

}  // namespace sectorflow::consumer
