// Finding the pixels that survived thresholding (candidates for a maximum) in a padded frame.
// Internal to the electron counter; shared by its plain and row-dark passes.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sectorflow/consumer/counting/frame_shape.hpp"

namespace sectorflow::consumer::counting {

/// Writes base + c for every nonzero out[c], c < cols, from `candidates` on; returns the end.
/// The caller provides room for every pixel, so there is no capacity check. Almost every pixel
/// is zero: a whole vector of pixels is compared with zero at once and the nonzero ones are
/// picked out of the comparison's bit mask, without a branch per pixel.
inline std::uint32_t* append_row_candidates(const std::uint16_t* out, std::uint32_t cols, std::uint32_t base,
                                            std::uint32_t* candidates) {
  std::uint32_t c = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  for (; c + 8 <= cols; c += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(out + c));
    // Two mask bits per 16-bit pixel; keep the low one of each nonzero pixel.
    auto nonzero = static_cast<std::uint32_t>(~_mm_movemask_epi8(_mm_cmpeq_epi16(v, zero))) & 0x5555u;
    while (nonzero != 0) {
      *candidates++ = base + c + static_cast<std::uint32_t>(__builtin_ctz(nonzero)) / 2;
      nonzero &= nonzero - 1;
    }
  }
#endif
  for (; c < cols; ++c) {
    *candidates = base + c;
    candidates += out[c] != 0;
  }
  return candidates;
}

/// The float version: a zeroed pixel holds +0.0f, a surviving one never compares equal to 0.
inline std::uint32_t* append_row_candidates(const float* out, std::uint32_t cols, std::uint32_t base,
                                            std::uint32_t* candidates) {
  std::uint32_t c = 0;
#if defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps();
  for (; c + 4 <= cols; c += 4) {
    auto nonzero = static_cast<std::uint32_t>(~_mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(out + c), zero))) & 0xFu;
    while (nonzero != 0) {
      *candidates++ = base + c + static_cast<std::uint32_t>(__builtin_ctz(nonzero));
      nonzero &= nonzero - 1;
    }
  }
#endif
  for (; c < cols; ++c) {
    *candidates = base + c;
    candidates += out[c] != 0.0f;
  }
  return candidates;
}

/// Writes the padded index of every pixel of the frame from `candidates` on; returns the end.
inline std::uint32_t* append_every_pixel(const FrameShape& shape, std::size_t stride, std::uint32_t* candidates) {
  for (std::uint32_t r = 0; r < shape.rows; ++r) {
    const auto base = static_cast<std::uint32_t>((std::size_t{r} + 1) * stride + 1);
    for (std::uint32_t c = 0; c < shape.cols; ++c) {
      *candidates++ = base + c;
    }
  }
  return candidates;
}

}  // namespace sectorflow::consumer::counting
