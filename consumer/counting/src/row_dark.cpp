// The row-dark pass of the electron counter: stempy's applyRowDark, which evens out the offset of
// each half row (the 4D Camera reads each half of a row through its own amplifier).
#include <algorithm>
#include <cstdint>

#include "candidates.hpp"
#include "sectorflow/consumer/counting/electron_counter.hpp"

namespace sectorflow::consumer::counting {
namespace {

// stempy stores float results in uint16 pixels: the conversion truncates through int32, so a
// negative value wraps and NaN or out-of-range values become 0, as on x86.
std::uint16_t to_pixel(float value) {
  if (!(value > -2147483648.0f && value < 2147483648.0f)) {
    return 0;
  }
  return static_cast<std::uint16_t>(static_cast<std::int32_t>(value));
}

// stempy accumulates the raw pixels of a half row into a float starting at 0.0f. While the sum
// stays below 2^24 every partial sum is an exact integer, so an integer sum gives the same float.
float half_row_mean(const std::uint16_t* raw, std::size_t n) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sum += raw[i];
  }
  float total;
  if (sum < (std::uint64_t{1} << 24)) {
    total = static_cast<float>(sum);
  } else {
    total = 0.0f;
    for (std::size_t i = 0; i < n; ++i) {
      total += static_cast<float>(raw[i]);
    }
  }
  return total / static_cast<float>(n);
}

// The middle value; for an even count the mean of the two middle values, halved in float.
float half_row_median(const std::uint16_t* raw, std::size_t n, std::vector<float>& scratch) {
  std::copy(raw, raw + n, scratch.begin());
  const auto begin = scratch.begin();
  const auto end = scratch.begin() + static_cast<std::ptrdiff_t>(n);
  const auto middle = begin + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(begin, middle, end);
  if (n % 2 == 1) {
    return *middle;
  }
  return (*std::max_element(begin, middle) + *middle) / 2.0f;
}

}  // namespace

void ElectronCounter::row_dark_pass(const std::uint16_t* const* rows) {
  const FrameShape& frame_shape = shape();
  const float* dark = calibration_->dark_reference();
  const float* gain = calibration_->gain_factor();
  const auto target = static_cast<float>(options_.optimized_mean);
  const std::uint32_t left = frame_shape.cols / 2;
  candidate_count_ = 0;
  if (!gain && keep_none_) {
    return;
  }
  std::uint32_t* end = candidates_.data();
  for (std::uint32_t r = 0; r < frame_shape.rows; ++r) {
    const auto base = static_cast<std::uint32_t>((std::size_t{r} + 1) * stride_ + 1);
    for (const auto& [start, stop] : {std::pair{0u, left}, std::pair{left, frame_shape.cols}}) {
      if (start == stop) {
        continue;
      }
      const std::size_t first = std::size_t{r} * frame_shape.cols + start;  // in the dark and gain maps
      const std::uint16_t* in = rows[r] + start;
      const std::size_t n = stop - start;
      const float level = options_.row_dark == RowDark::kMean ? half_row_mean(in, n)
                                                              : half_row_median(in, n, half_row_);
      const float scale = target / level;
      if (gain) {
        float* out = padded_float_.data() + base + start;
        for (std::size_t i = 0; i < n; ++i) {
          float v = static_cast<float>(in[i]);
          if (dark) {
            v -= dark[first + i];
          }
          v *= scale;
          v *= gain[first + i];
          out[i] = (v <= float_low_ || v >= float_high_) ? 0.0f : v;
        }
      } else {
        std::uint16_t* out = padded_integer_.data() + base + start;
        for (std::size_t i = 0; i < n; ++i) {
          std::uint16_t v = in[i];
          if (dark) {
            v = to_pixel(static_cast<float>(v) - dark[first + i]);
          }
          v = to_pixel(static_cast<float>(v) * scale);
          out[i] = (v >= keep_low_ && v <= keep_high_) ? v : std::uint16_t{0};
        }
      }
    }
    if (gain) {
      if (!every_pixel_is_candidate_) {
        end = append_row_candidates(padded_float_.data() + base, frame_shape.cols, base, end);
      }
    } else {
      end = append_row_candidates(padded_integer_.data() + base, frame_shape.cols, base, end);
    }
  }
  if (gain && every_pixel_is_candidate_) {
    end = append_every_pixel(frame_shape, stride_, candidates_.data());
  }
  candidate_count_ = static_cast<std::size_t>(end - candidates_.data());
}

}  // namespace sectorflow::consumer::counting
