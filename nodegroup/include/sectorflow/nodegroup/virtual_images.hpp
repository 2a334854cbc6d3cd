// Virtual images: the standard 4D-STEM images of a scan, made from each frame's counted electrons
// as they are counted (one radius test and a few sums per electron, no second pass): the
// electrons inside the bright-field disk, those in the annular dark-field ring, the centre of
// mass of all of them relative to the pattern centre, and the summed diffraction pattern. The
// detectors come from the [analysis] configuration table.
#pragma once

#include <cstdint>
#include <vector>

namespace sectorflow::nodegroup {

/// The virtual detectors, in frame pixels; pixel (r, c) is the square [r, r+1) x [c, c+1), and an
/// electron counted at pixel (r, c) is taken at its middle (r + 0.5, c + 0.5).
struct VirtualDetectors {
  double centre_row = 0.0;  ///< [analysis] centre_row: the pattern centre (negative in the table: frame centre)
  double centre_col = 0.0;
  double bright_field_radius = 0.0;  ///< [analysis] bright_field_radius_px: disk detector
  double dark_field_inner = 0.0;     ///< [analysis] dark_field_inner_px: ring detector, inner radius
  double dark_field_outer = 0.0;     ///< [analysis] dark_field_outer_px: outer radius

  /// Throws NodeGroupError for a negative, non-finite or inverted radius.
  void validate() const;
};

/// One frame's virtual-image values.
struct VirtualPixel {
  std::uint32_t bright_field = 0;  ///< electrons within bright_field_radius of the centre
  std::uint32_t dark_field = 0;    ///< electrons from dark_field_inner to dark_field_outer
  float com_x = 0.0F;              ///< mean column - centre_col over all electrons (NaN: none)
  float com_y = 0.0F;              ///< mean row - centre_row
};

/// A part of a scan's virtual images: one VirtualPixel per counted frame, aligned with the
/// frames of the ScanResult that holds it, and the diffraction pattern summed over them.
struct VirtualImages {
  std::vector<std::uint32_t> bright_field;
  std::vector<std::uint32_t> dark_field;
  std::vector<float> com_x;
  std::vector<float> com_y;
  std::vector<std::uint64_t> diffraction;  ///< frame_rows x frame_cols, C order; empty until a frame is added

  /// Appends the frame whose events (ascending flat pixel indices of a frame `frame_cols` wide)
  /// are given, and adds them to the diffraction pattern of `frame_pixels` pixels.
  VirtualPixel add(const VirtualDetectors& detectors, std::uint32_t frame_cols, std::size_t frame_pixels,
                   const std::vector<std::uint32_t>& events);
};

/// One frame's values, without recording them.
VirtualPixel virtual_pixel(const VirtualDetectors& detectors, std::uint32_t frame_cols,
                           const std::vector<std::uint32_t>& events);

}  // namespace sectorflow::nodegroup
