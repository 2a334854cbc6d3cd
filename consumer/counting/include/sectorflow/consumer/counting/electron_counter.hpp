// Counting one frame (docs/contracts.md, "Electron counting"), event for event as stempy 3.6.0's
// electron_count_frame:
//   - dark reference, no gain: pixel = raw - trunc(dark) in uint16 arithmetic (a pixel below its
//     dark wraps to a large value and is cut by the x-ray threshold);
//   - gain: pixel = (raw - dark) * gain_factor in float;
//   - pixels at or below the background threshold or at or above the x-ray threshold become 0;
//   - an event is a pixel strictly greater than each of its existing 8 neighbours;
//   - events are flat indices row * cols + col, ascending.
// (stempy's electron_count over a reader truncates raw - dark instead of the dark alone, so a
// pixel can differ by one ADU there; sectorflow follows electron_count_frame.)
// Row-dark correction (stempy's electron_count with apply_row_dark_subtraction) instead scales
// each half row by optimized_mean / (mean or median of its raw pixels) after subtracting the dark
// reference, with stempy's uint16 truncations, then applies the gain and the thresholds. (On a
// non-square frame stempy swaps width and height there and splits the buffer into half rows of
// the wrong length; we use the real rows. The 4D Camera's frames are square.)
//
// Speed: the threshold pass is a branch-free loop the compiler vectorises (AVX2 where the CPU has
// it), in chunks whose OR tells whether any pixel survived; only the surviving pixels
// (candidates) have their neighbours read, row by row while the rows are in cache; all buffers
// belong to the counter and are reused, so counting a frame allocates nothing once the event
// vector has grown.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "sectorflow/consumer/counting/calibration.hpp"
#include "sectorflow/consumer/counting/thresholds.hpp"

namespace sectorflow::consumer::counting {

enum class RowDark { kNone, kMean, kMedian };

struct CountingOptions {
  double background_threshold = 0.0;  ///< ADU; pixels at or below become 0
  double x_ray_threshold = std::numeric_limits<double>::infinity();  ///< ADU; pixels at or above become 0
  RowDark row_dark = RowDark::kNone;
  double optimized_mean = 0.0;  ///< row-dark target level (ThresholdStatistics::optimized_mean)

  /// The options counting with computed thresholds uses.
  static CountingOptions from(const ThresholdStatistics& statistics, RowDark row_dark = RowDark::kNone);
  /// Throws CountingError for a NaN threshold or a row-dark level that is not finite and positive.
  void validate() const;
};

class ElectronCounter {
 public:
  /// Throws CountingError for invalid options.
  ElectronCounter(std::shared_ptr<const Calibration> calibration, CountingOptions options);

  const FrameShape& shape() const { return calibration_->shape(); }
  const Calibration& calibration() const { return *calibration_; }
  const CountingOptions& options() const { return options_; }

  /// Counts one frame of shape().pixels() uint16 pixels, C order, read in place. `events` is
  /// cleared and receives the ascending flat indices; its capacity is kept for the next frame.
  /// Not thread-safe (the counter owns its scratch buffers): give each thread its own copy.
  void count(const std::uint16_t* frame, std::vector<std::uint32_t>& events);
  /// The same, for a frame whose rows lie anywhere: rows[r] points at row r's shape().cols pixels
  /// (2-byte aligned). A NodeGroup counts a frame from its sectors as they were received, each row
  /// read in place, without assembling it first.
  void count_rows(const std::uint16_t* const* rows, std::vector<std::uint32_t>& events);

 private:
  template <typename Pixel>
  void find_maxima(const std::vector<Pixel>& padded, std::vector<std::uint32_t>& events) const;
  template <typename Pixel>
  void find_row_maxima(const Pixel* padded, const std::uint32_t* first, const std::uint32_t* last, std::uint32_t row,
                       std::vector<std::uint32_t>& events) const;
  void count_integer(const std::uint16_t* const* rows, std::vector<std::uint32_t>& events);
  void count_float(const std::uint16_t* const* rows, std::vector<std::uint32_t>& events);
  void row_dark_pass(const std::uint16_t* const* rows);

  std::shared_ptr<const Calibration> calibration_;
  CountingOptions options_;
  std::size_t stride_ = 0;  // padded row length: cols + 2
  // Integer path: pixel kept iff keep_low_ <= value <= keep_high_ (the thresholds on integers).
  std::uint16_t keep_low_ = 0;
  std::uint16_t keep_high_ = 0;
  bool keep_none_ = false;
  // Float path: pixel zeroed iff value <= float_low_ or value >= float_high_ (same decisions as
  // the double comparisons stempy makes).
  float float_low_ = 0.0f;
  float float_high_ = 0.0f;
  bool every_pixel_is_candidate_ = false;  // a negative background lets zeroed pixels be maxima
  std::vector<std::uint16_t> dark_integer_;  // trunc(dark) as uint16, the integer path's dark
  // Frames padded by one pixel on each side (0 for integers, -inf for floats), so the neighbour
  // test needs no edge cases: a missing neighbour never beats a candidate.
  std::vector<std::uint16_t> padded_integer_;
  std::vector<float> padded_float_;
  // Padded indices of the surviving pixels: room for every pixel, filled up to candidate_count_.
  std::vector<std::uint32_t> candidates_;
  std::size_t candidate_count_ = 0;
  std::vector<float> half_row_;            // scratch of the row-dark median
  std::vector<const std::uint16_t*> frame_rows_;  // count(frame)'s row pointers into the frame
};

}  // namespace sectorflow::consumer::counting
