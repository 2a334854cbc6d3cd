// Per-pixel corrections applied before thresholding: a dark reference subtracted from each pixel
// and a gain factor multiplied into it. Both are optional; an empty vector means "not applied".
//
// The gain factor is what stempy's C++ core multiplies by. stempy's Python API takes a gain map
// and passes float32(1 / gain) down; sectorflow.consumer.counting does the same conversion.
#pragma once

#include <vector>

#include "sectorflow/consumer/counting/frame_shape.hpp"

namespace sectorflow::consumer::counting {

class Calibration {
 public:
  /// Copies and validates the maps: each must be empty or hold shape.pixels() finite values
  /// (dark reference values within +-2^31 ADU). Throws CountingError naming the map, the pixel
  /// and the value.
  Calibration(FrameShape shape, std::vector<float> dark_reference = {}, std::vector<float> gain_factor = {});

  const FrameShape& shape() const { return shape_; }
  bool has_dark_reference() const { return !dark_reference_.empty(); }
  bool has_gain() const { return !gain_factor_.empty(); }
  /// Row-major, shape().pixels() values, or nullptr when not applied.
  const float* dark_reference() const { return has_dark_reference() ? dark_reference_.data() : nullptr; }
  const float* gain_factor() const { return has_gain() ? gain_factor_.data() : nullptr; }

 private:
  FrameShape shape_;
  std::vector<float> dark_reference_;
  std::vector<float> gain_factor_;
};

}  // namespace sectorflow::consumer::counting
