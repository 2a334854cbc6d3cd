#include "sectorflow/nodegroup/virtual_images.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "sectorflow/nodegroup/nodegroup_error.hpp"

namespace sectorflow::nodegroup {

void VirtualDetectors::validate() const {
  const auto bad = [](double value) { return !std::isfinite(value) || value < 0.0; };
  if (!std::isfinite(centre_row) || !std::isfinite(centre_col)) {
    throw NodeGroupError("[analysis] centre_row/centre_col must be finite numbers");
  }
  if (bad(bright_field_radius) || bad(dark_field_inner) || bad(dark_field_outer)) {
    throw NodeGroupError("[analysis] bright_field_radius_px, dark_field_inner_px and dark_field_outer_px must be "
                         "finite and not negative");
  }
  if (dark_field_outer < dark_field_inner) {
    throw NodeGroupError("[analysis] dark_field_outer_px = " + std::to_string(dark_field_outer) +
                         " is below dark_field_inner_px = " + std::to_string(dark_field_inner) +
                         ": the ring's outer radius must not be smaller than its inner one");
  }
}

VirtualPixel virtual_pixel(const VirtualDetectors& detectors, std::uint32_t frame_cols,
                           const std::vector<std::uint32_t>& events) {
  const double bf2 = detectors.bright_field_radius * detectors.bright_field_radius;
  const double in2 = detectors.dark_field_inner * detectors.dark_field_inner;
  const double out2 = detectors.dark_field_outer * detectors.dark_field_outer;
  VirtualPixel pixel;
  double sum_row = 0.0;
  double sum_col = 0.0;
  for (const std::uint32_t event : events) {
    const std::uint32_t r = event / frame_cols;
    const double dr = r + 0.5 - detectors.centre_row;
    const double dc = (event - r * frame_cols) + 0.5 - detectors.centre_col;
    const double d2 = dr * dr + dc * dc;
    pixel.bright_field += d2 <= bf2 ? 1U : 0U;
    pixel.dark_field += (d2 >= in2 && d2 <= out2) ? 1U : 0U;
    sum_row += dr;
    sum_col += dc;
  }
  if (events.empty()) {
    pixel.com_x = pixel.com_y = std::numeric_limits<float>::quiet_NaN();
  } else {
    pixel.com_x = static_cast<float>(sum_col / static_cast<double>(events.size()));
    pixel.com_y = static_cast<float>(sum_row / static_cast<double>(events.size()));
  }
  return pixel;
}

VirtualPixel VirtualImages::add(const VirtualDetectors& detectors, std::uint32_t frame_cols, std::size_t frame_pixels,
                                const std::vector<std::uint32_t>& events) {
  const VirtualPixel pixel = virtual_pixel(detectors, frame_cols, events);
  bright_field.push_back(pixel.bright_field);
  dark_field.push_back(pixel.dark_field);
  com_x.push_back(pixel.com_x);
  com_y.push_back(pixel.com_y);
  if (diffraction.empty()) diffraction.assign(frame_pixels, 0);
  for (const std::uint32_t event : events) ++diffraction[event];
  return pixel;
}

}  // namespace sectorflow::nodegroup
