// The per-row kernels of the electron counter's threshold pass: correct each pixel, zero it unless
// it lies strictly between the thresholds, write it to the padded frame and note the survivors
// (candidates). Internal to the electron counter.
#pragma once

#include <cstdint>

namespace sectorflow::consumer::counting {

/// Integer path: v = in - dark (uint16 arithmetic; dark may be nullptr), kept iff
/// (uint16)(v - low) <= span. Writes base + c for each kept nonzero out[c] from `candidates` on
/// (room for n) and returns the end.
std::uint32_t* threshold_row_integer(const std::uint16_t* in, const std::uint16_t* dark, std::uint16_t low,
                                     std::uint16_t span, std::uint16_t* out, std::uint32_t n, std::uint32_t base,
                                     std::uint32_t* candidates);

/// Float path: v = (in - dark) * gain (dark may be nullptr), zeroed iff v <= low or v >= high.
/// Writes base + c for each nonzero out[c] when `collect` is true, like the integer path.
std::uint32_t* threshold_row_float(const std::uint16_t* in, const float* dark, const float* gain, float low,
                                   float high, float* out, std::uint32_t n, std::uint32_t base, bool collect,
                                   std::uint32_t* candidates);

}  // namespace sectorflow::consumer::counting
