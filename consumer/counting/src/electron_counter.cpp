#include "sectorflow/consumer/counting/electron_counter.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "candidates.hpp"
#include "threshold_rows.hpp"
#include "sectorflow/consumer/counting/errors.hpp"

namespace sectorflow::consumer::counting {
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
  candidates_.resize(frame_shape.pixels());
  frame_rows_.resize(frame_shape.rows);
  if (options_.row_dark == RowDark::kMedian) {
    half_row_.resize(frame_shape.cols - frame_shape.cols / 2);
  }
}

void ElectronCounter::count(const std::uint16_t* frame, std::vector<std::uint32_t>& events) {
  if (frame == nullptr) {
    events.clear();
    throw CountingError("electron counter was given a null frame pointer");
  }
  for (std::uint32_t r = 0; r < shape().rows; ++r) frame_rows_[r] = frame + std::size_t{r} * shape().cols;
  count_rows(frame_rows_.data(), events);
}

void ElectronCounter::count_rows(const std::uint16_t* const* rows, std::vector<std::uint32_t>& events) {
  events.clear();
  if (shape().pixels() == 1) {
    events.push_back(0);  // a lone pixel has no neighbour to beat
    return;
  }
  if (options_.row_dark != RowDark::kNone) {
    row_dark_pass(rows);
    if (calibration_->has_gain()) {
      find_maxima(padded_float_, events);
    } else {
      find_maxima(padded_integer_, events);
    }
  } else if (calibration_->has_gain()) {
    count_float(rows, events);
  } else if (!keep_none_) {
    count_integer(rows, events);
  }
}

// Rows are thresholded one after the other, and the candidates of row r - 1 are tested as soon
// as row r exists: the three rows a test reads are then still in the L1 cache.
void ElectronCounter::count_integer(const std::uint16_t* const* rows, std::vector<std::uint32_t>& events) {
  const FrameShape& frame_shape = shape();
  const auto span = static_cast<std::uint16_t>(keep_high_ - keep_low_);
  const std::uint16_t* dark = dark_integer_.empty() ? nullptr : dark_integer_.data();
  const std::uint16_t* padded = padded_integer_.data();
  std::uint32_t* previous = candidates_.data();
  std::uint32_t* end = previous;
  for (std::uint32_t r = 0; r < frame_shape.rows; ++r) {
    const std::size_t row0 = std::size_t{r} * frame_shape.cols;
    const auto base = static_cast<std::uint32_t>((std::size_t{r} + 1) * stride_ + 1);
    std::uint32_t* current = end;
    end = threshold_row_integer(rows[r], dark ? dark + row0 : nullptr, keep_low_, span,
                                padded_integer_.data() + base, frame_shape.cols, base, current);
    if (r > 0) {
      find_row_maxima(padded, previous, current, r - 1, events);
    }
    previous = current;
  }
  find_row_maxima(padded, previous, end, frame_shape.rows - 1, events);
}

void ElectronCounter::count_float(const std::uint16_t* const* rows, std::vector<std::uint32_t>& events) {
  const FrameShape& frame_shape = shape();
  const float* dark = calibration_->dark_reference();
  const float* gain = calibration_->gain_factor();
  const float* padded = padded_float_.data();
  const bool collect = !every_pixel_is_candidate_;
  std::uint32_t* previous = candidates_.data();
  std::uint32_t* end = previous;
  for (std::uint32_t r = 0; r < frame_shape.rows; ++r) {
    const std::size_t row0 = std::size_t{r} * frame_shape.cols;
    const auto base = static_cast<std::uint32_t>((std::size_t{r} + 1) * stride_ + 1);
    std::uint32_t* current = end;
    end = threshold_row_float(rows[r], dark ? dark + row0 : nullptr, gain + row0, float_low_, float_high_,
                              padded_float_.data() + base, frame_shape.cols, base, collect, current);
    if (r > 0 && collect) {
      find_row_maxima(padded, previous, current, r - 1, events);
    }
    previous = current;
  }
  if (collect) {
    find_row_maxima(padded, previous, end, frame_shape.rows - 1, events);
  } else {
    candidate_count_ = static_cast<std::size_t>(append_every_pixel(frame_shape, stride_, candidates_.data()) -
                                                candidates_.data());
    find_maxima(padded_float_, events);
  }
}

template <typename Pixel>
void ElectronCounter::find_row_maxima(const Pixel* s, const std::uint32_t* first, const std::uint32_t* last,
                                      std::uint32_t row, std::vector<std::uint32_t>& events) const {
  const std::size_t w = stride_;
  // Padded index p of row `row` has flat index p - (row + 1) * w - 1 + row * cols.
  const auto offset = static_cast<std::uint32_t>(2 * std::size_t{row} + w + 1);
  for (; first != last; ++first) {
    const std::uint32_t p = *first;
    const Pixel v = s[p];
    const Pixel* up = s + p - w;
    const Pixel* down = s + p + w;
    // All eight compared without short-circuit: one branch per candidate instead of several
    // unpredictable ones.
    const bool maximum = (v > s[p - 1]) & (v > s[p + 1]) & (v > up[-1]) & (v > up[0]) & (v > up[1]) &
                         (v > down[-1]) & (v > down[0]) & (v > down[1]);
    if (maximum) {
      events.push_back(p - offset);
    }
  }
}

// The candidates of the whole frame (ascending), tested row by row.
template <typename Pixel>
void ElectronCounter::find_maxima(const std::vector<Pixel>& padded, std::vector<std::uint32_t>& events) const {
  const std::uint32_t* first = candidates_.data();
  const std::uint32_t* last = first + candidate_count_;
  std::uint32_t row = 0;
  while (first != last) {
    const auto row_end = static_cast<std::uint32_t>((std::size_t{row} + 2) * stride_);  // first index past row
    const std::uint32_t* split = first;
    while (split != last && *split < row_end) {
      ++split;
    }
    find_row_maxima(padded.data(), first, split, row, events);
    first = split;
    ++row;
  }
}

template void ElectronCounter::find_maxima<std::uint16_t>(const std::vector<std::uint16_t>&,
                                                          std::vector<std::uint32_t>&) const;
template void ElectronCounter::find_maxima<float>(const std::vector<float>&, std::vector<std::uint32_t>&) const;

}  // namespace sectorflow::consumer::counting
