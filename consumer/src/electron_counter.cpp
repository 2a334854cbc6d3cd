#include "sectorflow/consumer/electron_counter.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "candidates.hpp"
#include "threshold_rows.hpp"
#include "sectorflow/consumer/errors.hpp"

namespace sectorflow::consumer {
namespace {

// The integer range [low, high] of values v with v > background and v < x_ray, clamped to uint16;
// false when no uint16 value survives.
bool integer_keep_range(double background, double x_ray, std::uint16_t& low, std::uint16_t& high) {
  const double lo = std::floor(background) + 1.0;  // v > b  <=>  v >= floor(b) + 1
  const double hi = std::ceil(x_ray) - 1.0;        // v < x  <=>  v <= ceil(x) - 1
  if (lo > 65535.0 || hi < 0.0 || lo > hi) {
    return false;
  }
  low = static_cast<std::uint16_t>(std::max(lo, 0.0));
  high = static_cast<std::uint16_t>(std::min(hi, 65535.0));
  return true;
}

// The float nearest to x on the given side, so that float comparisons with it decide exactly as
// comparisons with the double x do.
float float_at_or_below(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) {
    f = std::nextafter(f, -HUGE_VALF);
  }
  return f;
}

float float_at_or_above(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) < x) {
    f = std::nextafter(f, HUGE_VALF);
  }
  return f;
}

}  // namespace

CountingOptions CountingOptions::from(const ThresholdStatistics& statistics, RowDark row_dark) {
  CountingOptions options;
  options.background_threshold = statistics.background_threshold;
  options.x_ray_threshold = statistics.x_ray_threshold;
  options.row_dark = row_dark;
  options.optimized_mean = statistics.optimized_mean;
  return options;
}

void CountingOptions::validate() const {
  if (std::isnan(background_threshold) || std::isnan(x_ray_threshold)) {
    throw CountingError("counting thresholds must be numbers, got background " + std::to_string(background_threshold) +
                        ", x-ray " + std::to_string(x_ray_threshold));
  }
  if (row_dark != RowDark::kNone && !(std::isfinite(optimized_mean) && optimized_mean > 0.0)) {
    throw CountingError("row-dark correction needs a positive optimized mean (the thresholds' optimized_mean), got " +
                        std::to_string(optimized_mean));
  }
}

ElectronCounter::ElectronCounter(std::shared_ptr<const Calibration> calibration, CountingOptions options)
    : calibration_(std::move(calibration)), options_(options) {
  if (!calibration_) {
    throw CountingError("electron counter needs a calibration (frame shape, optional dark and gain)");
  }
  options_.validate();
  const FrameShape& frame_shape = calibration_->shape();
  stride_ = std::size_t{frame_shape.cols} + 2;
  const std::size_t padded = stride_ * (std::size_t{frame_shape.rows} + 2);
  if (calibration_->has_gain()) {
    float_low_ = float_at_or_below(options_.background_threshold);
    float_high_ = float_at_or_above(options_.x_ray_threshold);
    // Kept values exceed the background; only a negative background lets a kept value be <= 0
    // and a zeroed pixel (0) then be a maximum, so only then is every pixel a candidate.
    every_pixel_is_candidate_ = options_.background_threshold < 0.0;
    padded_float_.assign(padded, -HUGE_VALF);
  } else {
    keep_none_ = !integer_keep_range(options_.background_threshold, options_.x_ray_threshold, keep_low_, keep_high_);
    padded_integer_.assign(padded, 0);
    if (calibration_->has_dark_reference()) {
      const float* dark = calibration_->dark_reference();
      dark_integer_.resize(frame_shape.pixels());
      for (std::size_t i = 0; i < dark_integer_.size(); ++i) {
        // stempy's static_cast<uint16_t>(dark): truncation, wrapping like the hardware does.
        dark_integer_[i] = static_cast<std::uint16_t>(static_cast<std::int32_t>(dark[i]));
      }
    }
  }
  if (options_.row_dark == RowDark::kMedian) {
    half_row_.resize(frame_shape.cols - frame_shape.cols / 2);
  }
}

void ElectronCounter::count(const std::uint16_t* frame, std::vector<std::uint32_t>& events) {
  events.clear();
  if (frame == nullptr) {
    throw CountingError("electron counter was given a null frame pointer");
  }
  if (shape().pixels() == 1) {
    events.push_back(0);  // a lone pixel has no neighbour to beat
    return;
  }
  if (options_.row_dark != RowDark::kNone) {
    row_dark_pass(frame);
  } else if (calibration_->has_gain()) {
    threshold_float(frame);
  } else {
    if (keep_none_) {
      return;
    }
    threshold_integer(frame);
  }
  if (calibration_->has_gain()) {
    find_maxima(padded_float_, events);
  } else {
    find_maxima(padded_integer_, events);
  }
}

void ElectronCounter::threshold_integer(const std::uint16_t* frame) {
  const FrameShape& frame_shape = shape();
  const auto span = static_cast<std::uint16_t>(keep_high_ - keep_low_);
  const std::uint16_t* dark = dark_integer_.empty() ? nullptr : dark_integer_.data();
  candidates_.clear();
  for (std::uint32_t r = 0; r < frame_shape.rows; ++r) {
    const std::size_t row0 = std::size_t{r} * frame_shape.cols;
    const auto base = static_cast<std::uint32_t>((std::size_t{r} + 1) * stride_ + 1);
    threshold_row_integer(frame + row0, dark ? dark + row0 : nullptr, keep_low_, span, padded_integer_.data() + base,
                          frame_shape.cols, base, candidates_);
  }
}

void ElectronCounter::threshold_float(const std::uint16_t* frame) {
  const FrameShape& frame_shape = shape();
  const float* dark = calibration_->dark_reference();
  const float* gain = calibration_->gain_factor();
  candidates_.clear();
  for (std::uint32_t r = 0; r < frame_shape.rows; ++r) {
    const std::size_t row0 = std::size_t{r} * frame_shape.cols;
    const auto base = static_cast<std::uint32_t>((std::size_t{r} + 1) * stride_ + 1);
    threshold_row_float(frame + row0, dark ? dark + row0 : nullptr, gain + row0, float_low_, float_high_,
                        padded_float_.data() + base, frame_shape.cols, base, !every_pixel_is_candidate_, candidates_);
  }
  if (every_pixel_is_candidate_) {
    append_every_pixel(frame_shape, stride_, candidates_);
  }
}

template <typename Pixel>
void ElectronCounter::find_maxima(std::vector<Pixel>& padded, std::vector<std::uint32_t>& events) {
  const Pixel* s = padded.data();
  const std::size_t w = stride_;
  const std::uint32_t cols = shape().cols;
  for (const std::uint32_t p : candidates_) {
    const Pixel v = s[p];
    const Pixel* up = s + p - w;
    const Pixel* down = s + p + w;
    if (v > s[p - 1] && v > s[p + 1] && v > up[-1] && v > up[0] && v > up[1] && v > down[-1] && v > down[0] &&
        v > down[1]) {
      const std::uint32_t row = static_cast<std::uint32_t>(p / w) - 1;
      const std::uint32_t col = static_cast<std::uint32_t>(p % w) - 1;
      events.push_back(row * cols + col);
    }
  }
}

template void ElectronCounter::find_maxima<std::uint16_t>(std::vector<std::uint16_t>&, std::vector<std::uint32_t>&);
template void ElectronCounter::find_maxima<float>(std::vector<float>&, std::vector<std::uint32_t>&);

}  // namespace sectorflow::consumer
