#include "sectorflow/consumer/counting/calibration.hpp"

#include <cmath>
#include <string>

#include "sectorflow/consumer/counting/errors.hpp"

namespace sectorflow::consumer::counting {
namespace {

void check_map(const std::vector<float>& values, const FrameShape& shape, const char* name, double limit) {
  if (values.empty()) {
    return;
  }
  if (values.size() != shape.pixels()) {
    throw CountingError(std::string(name) + " has " + std::to_string(values.size()) + " values, expected " +
                        std::to_string(shape.pixels()) + " (frame shape " + shape.str() + ")");
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (!std::isfinite(v) || std::fabs(static_cast<double>(v)) >= limit) {
      throw CountingError(std::string(name) + " at pixel (" + std::to_string(i / shape.cols) + ", " +
                          std::to_string(i % shape.cols) + ") is " + std::to_string(v) +
                          "; every value must be finite" +
                          (std::isfinite(limit) ? " and within +-2^31" : ""));
    }
  }
}

}  // namespace

Calibration::Calibration(FrameShape shape, std::vector<float> dark_reference, std::vector<float> gain_factor)
    : shape_(shape), dark_reference_(std::move(dark_reference)), gain_factor_(std::move(gain_factor)) {
  shape_.validate();
  // Dark values are truncated to integers, so they must fit int32 to be defined.
  check_map(dark_reference_, shape_, "dark reference", 2147483648.0);
  check_map(gain_factor_, shape_, "gain factor", HUGE_VAL);
}

}  // namespace sectorflow::consumer::counting
