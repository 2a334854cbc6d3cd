// Counting thresholds from a sample of frames, as stempy's calculate_thresholds computes them
// (docs/contracts.md, "Electron counting"):
//   1. every pixel of every sample frame, dark-subtracted and gain-corrected, as an integer ADU
//      value: raw - trunc(dark) without gain; floor(floor(raw - dark) * gain_factor) with gain
//      (stempy truncates, the same for the non-negative values it handles);
//   2. mean and standard deviation (n - 1) of those values; x-ray threshold = mean + x_sigma * std;
//   3. a histogram with one bin per ADU over [min_bin, max_bin), the range stempy uses;
//   4. a Gaussian a * exp(-(x - mu)^2 / (2 sigma^2)) fitted to the histogram by least squares,
//      started from (highest count, mean, std): optimized mean = mu, optimized std = |sigma|;
//   5. background threshold = optimized mean + background_sigma * optimized std.
// Unlike stempy, a value below zero stays negative instead of wrapping around uint16 (stempy then
// fails or fits garbage), so a dark reference at the noise level works; whenever no value is
// negative the statistics are stempy's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sectorflow/consumer/counting/calibration.hpp"

namespace sectorflow::consumer::counting {

/// A rectangle of a frame's pixels: one sector an incomplete frame holds.
struct PixelBlock {
  std::size_t row0 = 0;
  std::size_t col0 = 0;
  std::size_t rows = 0;
  std::size_t cols = 0;
};

struct ThresholdOptions {
  double background_threshold_n_sigma = 4.0;
  double x_ray_threshold_n_sigma = 10.0;
};

/// Every statistic stempy reports, under the names of stempy's counting metadata.
struct ThresholdStatistics {
  bool threshold_calculated = true;  ///< false when the thresholds were given, not computed
  double background_threshold = 0.0;
  double x_ray_threshold = 0.0;
  int number_of_samples = 0;  ///< frames in the sample
  double min_sample = 0.0;
  double max_sample = 0.0;
  double mean = 0.0;
  double variance = 0.0;
  double std_dev = 0.0;
  int number_of_bins = 0;
  double x_ray_threshold_n_sigma = 0.0;
  double background_threshold_n_sigma = 0.0;
  double optimized_mean = 0.0;
  double optimized_std_dev = 0.0;
};

/// What a threshold sample keeps of its frames: exact integer sums and one count per value, so two
/// samples of one scan (two NodeGroups' frames) merge into the sample of all their frames, and the
/// statistics of the merge are those of calculate_thresholds over all of them.
struct SampleHistogram {
  std::uint64_t frames = 0;
  std::uint64_t pixels = 0;
  std::int64_t min = 0;               ///< the value of counts[0]
  std::int64_t sum = 0;
  std::vector<std::uint64_t> counts;  ///< one per value, min .. min + counts.size() - 1

  /// Adds `other`'s frames. Throws CountingError when the values would span more ADU than a histogram holds.
  void merge(const SampleHistogram& other);
  /// The statistics of its frames. Throws CountingError as calculate_thresholds does.
  ThresholdStatistics statistics(const ThresholdOptions& options = {}) const;
};

/// A threshold sample built one frame at a time: each frame is read once, when added, into exact
/// integer sums and one count per sample value, so the caller need not keep the frames (a NodeGroup
/// packs its sample frames while they wait to be counted). The statistics are those of
/// calculate_thresholds over the same frames, whatever the order they were added in.
class ThresholdSample {
 public:
  /// The calibration must outlive the sample.
  explicit ThresholdSample(const Calibration& calibration) : calibration_(&calibration) {}

  /// Adds one frame (calibration.shape().pixels() uint16 pixels, C order). Throws CountingError
  /// for a null frame or when the sample's values would span more ADU than a histogram may hold
  /// (the sample is then as before the call).
  void add(const std::uint16_t* frame);
  /// Adds only the `blocks` of one frame: the sectors of a frame that never came whole (a scan a
  /// receiver sent nothing of, a replay of what one receiver spilled). Throws as add(), and for a
  /// block outside the frame. A frame of every block is add(frame).
  void add(const std::uint16_t* frame, const std::vector<PixelBlock>& blocks);
  std::size_t frames() const { return frames_; }
  /// The statistics of the frames added. Throws CountingError as calculate_thresholds does.
  ThresholdStatistics statistics(const ThresholdOptions& options = {}) const;
  /// Its frames' sums and counts (a copy).
  SampleHistogram histogram() const;

 private:
  template <typename Value, typename Pixels>
  void add_values(const std::uint16_t* frame, const Value& value, const Pixels& each_pixel);
  template <typename Pixels>
  void add_pixels(const std::uint16_t* frame, const Pixels& each_pixel);

  const Calibration* calibration_;
  std::size_t frames_ = 0;
  std::uint64_t pixels_ = 0;            // pixels added, over every frame
  std::int64_t min_ = 0;                // the value of counts_[0]
  std::int64_t max_ = 0;
  std::int64_t sum_ = 0;
  std::vector<std::uint64_t> counts_;   // one per value, min_ .. max_
};

/// Computes the thresholds from `frames` (each calibration.shape().pixels() uint16 pixels, C
/// order; every frame is used once, the caller chooses the sample). Throws CountingError when
/// the sample is empty, has no spread to fit, or the fit does not converge.
ThresholdStatistics calculate_thresholds(const std::vector<const std::uint16_t*>& frames,
                                         const Calibration& calibration, const ThresholdOptions& options = {});

}  // namespace sectorflow::consumer::counting
