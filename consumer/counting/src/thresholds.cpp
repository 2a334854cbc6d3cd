#include "sectorflow/consumer/counting/thresholds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "gaussian_fit.hpp"
#include "sectorflow/consumer/counting/errors.hpp"

namespace sectorflow::consumer::counting {
namespace {

// Histograms of the whole sample range are counted in memory; beyond this many ADU the gain is
// almost certainly wrong, and we say so instead of allocating gigabytes.
constexpr std::int64_t kMaxSampleRange = std::int64_t{1} << 26;

// The integer sample value of one pixel, with stempy's truncations (thresholds.hpp, step 1).
template <bool kDark, bool kGain>
struct SampleValue {
  const float* dark;
  const float* gain;

  std::int64_t operator()(std::uint16_t raw, std::size_t pixel) const {
    if constexpr (kGain) {
      // stempy truncates; floor is the same for the non-negative values stempy can handle, and
      // below zero it keeps one ADU per bin (truncation would pile (-1, 1) into the zero bin and
      // squeeze the fitted sigma).
      float value = static_cast<float>(raw);
      if constexpr (kDark) {
        value = std::floor(value - dark[pixel]);
      }
      const float scaled = std::floor(value * gain[pixel]);
      if (!(std::fabs(scaled) < 2147483648.0f)) {
        throw CountingError("sample value " + std::to_string(scaled) + " at pixel " + std::to_string(pixel) +
                            " is out of range; check the gain map");
      }
      return static_cast<std::int64_t>(scaled);
    } else if constexpr (kDark) {
      return std::int64_t{raw} - static_cast<std::int64_t>(dark[pixel]);
    } else {
      return std::int64_t{raw};
    }
  }
};

// stempy converts these bounds with static_cast<int>; saturate instead of overflowing.
std::int64_t truncate_to_int(double x) {
  constexpr double kLimit = 2147483647.0;
  if (std::isnan(x)) {
    return 0;
  }
  return static_cast<std::int64_t>(std::clamp(x, -kLimit, kLimit));
}

}  // namespace

template <typename Value, typename Pixels>
void ThresholdSample::add_values(const std::uint16_t* frame, const Value& value, const Pixels& each_pixel) {
  // Two passes over the frame: its range (to size the histogram once), then one count per value.
  std::int64_t lo = std::numeric_limits<std::int64_t>::max();
  std::int64_t hi = std::numeric_limits<std::int64_t>::min();
  std::int64_t sum = 0;
  std::uint64_t pixels = 0;
  each_pixel([&](std::size_t i) {
    const std::int64_t v = value(frame[i], i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    ++pixels;
  });
  if (pixels == 0) return;
  if (pixels_ > 0) {
    lo = std::min(lo, min_);
    hi = std::max(hi, max_);
  }
  if (hi - lo >= kMaxSampleRange) {
    throw CountingError("threshold sample values span " + std::to_string(lo) + " to " + std::to_string(hi) +
                        " ADU; check the dark reference and gain map");
  }
  if (pixels_ == 0) {
    counts_.assign(static_cast<std::size_t>(hi - lo + 1), 0);
  } else {
    counts_.insert(counts_.begin(), static_cast<std::size_t>(min_ - lo), 0);
    counts_.resize(static_cast<std::size_t>(hi - lo + 1), 0);
  }
  min_ = lo;
  max_ = hi;
  sum_ += sum;
  each_pixel([&](std::size_t i) { ++counts_[static_cast<std::size_t>(value(frame[i], i) - min_)]; });
  pixels_ += pixels;
  ++frames_;
}

template <typename Pixels>
void ThresholdSample::add_pixels(const std::uint16_t* frame, const Pixels& each_pixel) {
  if (frame == nullptr) {
    throw CountingError("threshold sample frame " + std::to_string(frames_) + " is a null pointer");
  }
  const float* dark = calibration_->dark_reference();
  const float* gain = calibration_->gain_factor();
  if (dark && gain) {
    add_values(frame, SampleValue<true, true>{dark, gain}, each_pixel);
  } else if (dark) {
    add_values(frame, SampleValue<true, false>{dark, gain}, each_pixel);
  } else if (gain) {
    add_values(frame, SampleValue<false, true>{dark, gain}, each_pixel);
  } else {
    add_values(frame, SampleValue<false, false>{dark, gain}, each_pixel);
  }
}

void ThresholdSample::add(const std::uint16_t* frame) {
  const std::size_t pixels = calibration_->shape().pixels();
  add_pixels(frame, [pixels](const auto& visit) {
    for (std::size_t i = 0; i < pixels; ++i) visit(i);
  });
}

void ThresholdSample::add(const std::uint16_t* frame, const std::vector<PixelBlock>& blocks) {
  const FrameShape shape = calibration_->shape();
  for (const PixelBlock& b : blocks) {
    if (b.row0 + b.rows > shape.rows || b.col0 + b.cols > shape.cols) {
      throw CountingError("threshold sample block of " + std::to_string(b.rows) + " x " + std::to_string(b.cols) +
                          " pixels at (" + std::to_string(b.row0) + ", " + std::to_string(b.col0) +
                          ") is outside the " + shape.str() + " frame");
    }
  }
  add_pixels(frame, [&blocks, cols = std::size_t{shape.cols}](const auto& visit) {
    for (const PixelBlock& b : blocks) {
      for (std::size_t r = b.row0; r < b.row0 + b.rows; ++r) {
        for (std::size_t c = b.col0; c < b.col0 + b.cols; ++c) visit(r * cols + c);
      }
    }
  });
}

ThresholdStatistics calculate_thresholds(const std::vector<const std::uint16_t*>& frames,
                                         const Calibration& calibration, const ThresholdOptions& options) {
  for (std::size_t f = 0; f < frames.size(); ++f) {
    if (frames[f] == nullptr) {
      throw CountingError("threshold sample frame " + std::to_string(f) + " is a null pointer");
    }
  }
  ThresholdSample sample(calibration);
  for (const std::uint16_t* frame : frames) sample.add(frame);
  return sample.statistics(options);
}

SampleHistogram ThresholdSample::histogram() const {
  return SampleHistogram{frames_, pixels_, min_, sum_, counts_};
}

ThresholdStatistics ThresholdSample::statistics(const ThresholdOptions& options) const {
  return histogram().statistics(options);
}

void SampleHistogram::merge(const SampleHistogram& other) {
  if (other.pixels == 0 || other.counts.empty()) {
    frames += other.frames;
    return;
  }
  if (pixels == 0 || counts.empty()) {
    const std::uint64_t mine = frames;
    *this = other;
    frames += mine;
    return;
  }
  const std::int64_t max = min + static_cast<std::int64_t>(counts.size()) - 1;
  const std::int64_t other_max = other.min + static_cast<std::int64_t>(other.counts.size()) - 1;
  const std::int64_t lo = std::min(min, other.min);
  const std::int64_t hi = std::max(max, other_max);
  if (hi - lo >= kMaxSampleRange) {
    throw CountingError("merged threshold samples span " + std::to_string(lo) + " to " + std::to_string(hi) +
                        " ADU; check the dark reference and gain map");
  }
  counts.insert(counts.begin(), static_cast<std::size_t>(min - lo), 0);
  counts.resize(static_cast<std::size_t>(hi - lo + 1), 0);
  for (std::size_t k = 0; k < other.counts.size(); ++k) counts[static_cast<std::size_t>(other.min - lo) + k] += other.counts[k];
  min = lo;
  frames += other.frames;
  pixels += other.pixels;
  sum += other.sum;
}

ThresholdStatistics SampleHistogram::statistics(const ThresholdOptions& options) const {
  const std::size_t frames_ = static_cast<std::size_t>(frames);
  const std::uint64_t pixels_ = counts.empty() ? 0 : pixels;
  const std::int64_t min_ = min;
  const std::int64_t max_ = min + static_cast<std::int64_t>(counts.size()) - 1;
  const std::int64_t sum_ = sum;
  const std::vector<std::uint64_t>& counts_ = counts;
  if (frames_ == 0 || pixels_ == 0) {
    throw CountingError("threshold sample is empty; pass at least one frame");
  }
  if (!std::isfinite(options.background_threshold_n_sigma) || !std::isfinite(options.x_ray_threshold_n_sigma)) {
    throw CountingError("threshold n_sigma values must be finite, got background " +
                        std::to_string(options.background_threshold_n_sigma) + ", x-ray " +
                        std::to_string(options.x_ray_threshold_n_sigma));
  }
  const double n = static_cast<double>(pixels_);
  if (n < 2.0) {
    throw CountingError("threshold sample has a single pixel; a standard deviation needs two or more");
  }

  ThresholdStatistics s;
  s.threshold_calculated = true;
  s.number_of_samples = static_cast<int>(frames_);
  s.min_sample = static_cast<double>(min_);
  s.max_sample = static_cast<double>(max_);
  s.mean = static_cast<double>(sum_) / n;
  double squares = 0.0;
  for (std::size_t k = 0; k < counts_.size(); ++k) {
    if (counts_[k] != 0) {
      const double d = static_cast<double>(min_ + static_cast<std::int64_t>(k)) - s.mean;
      squares += static_cast<double>(counts_[k]) * d * d;
    }
  }
  s.variance = squares / (n - 1.0);
  s.std_dev = std::sqrt(s.variance);
  s.x_ray_threshold_n_sigma = options.x_ray_threshold_n_sigma;
  s.background_threshold_n_sigma = options.background_threshold_n_sigma;
  s.x_ray_threshold = s.mean + options.x_ray_threshold_n_sigma * s.std_dev;

  // stempy's bin range: it scales the absolute x-ray threshold (not its n_sigma) by the standard
  // deviation, which in practice spans the whole sample. We keep it so the fit sees the same bins.
  const std::int64_t max_bin = std::min(max_, truncate_to_int(s.mean + s.x_ray_threshold * s.std_dev));
  const std::int64_t min_bin = std::max(min_, truncate_to_int(s.mean - s.x_ray_threshold * s.std_dev));
  const std::int64_t bins = max_bin - min_bin;
  if (bins < 3) {
    throw CountingError("threshold sample values span only " + std::to_string(min_) + " to " +
                        std::to_string(max_) + " ADU (" + std::to_string(std::max<std::int64_t>(bins, 0)) +
                        " histogram bins); fitting the noise peak needs frames with dark noise");
  }
  s.number_of_bins = static_cast<int>(bins);
  std::vector<double> x(static_cast<std::size_t>(bins));
  std::vector<double> y(static_cast<std::size_t>(bins));
  for (std::int64_t b = 0; b < bins; ++b) {
    x[static_cast<std::size_t>(b)] = static_cast<double>(min_bin + b);
    y[static_cast<std::size_t>(b)] = static_cast<double>(counts_[static_cast<std::size_t>(min_bin - min_ + b)]);
  }
  const std::size_t peak = static_cast<std::size_t>(std::max_element(y.begin(), y.end()) - y.begin());
  const GaussianFit fit = fit_gaussian(x, y, {y[peak], s.mean, s.std_dev});
  if (!fit.converged || !std::isfinite(fit.parameters.mean) || !std::isfinite(fit.parameters.sigma) ||
      fit.parameters.sigma == 0.0) {
    throw CountingError("Gaussian fit of the threshold sample histogram did not converge after " +
                        std::to_string(fit.iterations) + " iterations (mean " + std::to_string(s.mean) + ", std " +
                        std::to_string(s.std_dev) + "); check that the sample frames hold dark noise");
  }
  s.optimized_mean = fit.parameters.mean;
  s.optimized_std_dev = std::fabs(fit.parameters.sigma);
  s.background_threshold = s.optimized_mean + options.background_threshold_n_sigma * s.optimized_std_dev;
  return s;
}

}  // namespace sectorflow::consumer::counting
