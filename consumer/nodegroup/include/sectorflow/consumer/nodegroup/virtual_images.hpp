// Virtual images: 4D-STEM images of a scan, made from each frame's counted electrons as they are
// counted, in one pass over a frame's events: per electron, one look-up of the detectors its
// pixel lies in (a table made once per NodeGroup) and a count per detector, the centre-of-mass
// sums, and an increment of the summed diffraction pattern. The detectors come from the
// [analysis] configuration table ([[analysis.virtual_detectors]]: disks, annuli, rectangles, each
// named); the centre of mass and the summed pattern are always made.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sectorflow::consumer::nodegroup {

/// At most this many detectors: a pixel's detectors are the bits of a 16-bit mask
/// (configs/schema.py's MAX_VIRTUAL_DETECTORS).
inline constexpr std::size_t kMaxVirtualDetectors = 16;

enum class DetectorKind : std::uint8_t { kDisk, kAnnulus, kRectangle, kMask };

/// One virtual detector in frame pixels; pixel (r, c) is the point (r, c), as in LiberTEM's masks and
/// stempy (analysis/SPEC.md "Pixel coordinates"), and it belongs to a disk when its distance from the
/// centre is at most the radius, to an annulus when inner < distance <= outer (a rectangle: when r, c
/// lie in it).
struct VirtualDetector {
  std::string name;  ///< the image's name: /virtual_images/<name>, the live stream's field
  DetectorKind kind = DetectorKind::kDisk;
  double centre_row = 0.0;  ///< disk, annulus
  double centre_col = 0.0;
  double radius = 0.0;  ///< disk
  double inner = 0.0;   ///< annulus: inner < distance <= outer
  double outer = 0.0;
  std::uint32_t row0 = 0;  ///< rectangle: rows row0 .. row0 + rows - 1, columns col0 .. col0 + cols - 1
  std::uint32_t col0 = 0;
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  std::vector<std::uint8_t> mask;  ///< mask: frame_rows x frame_cols, C order, nonzero at the detector's pixels
  std::string mask_file;           ///< mask: where it was read from (the file's attribute)

  /// Whether pixel (row, col) belongs to the detector (not for a mask: VirtualImager reads it).
  bool contains(std::uint32_t row, std::uint32_t col) const;
};

/// The [analysis] table's detectors, and the centre the centre of mass is taken from.
struct VirtualDetectors {
  double centre_row = 0.0;  ///< [analysis] centre_row (negative in the table: frame centre)
  double centre_col = 0.0;
  std::vector<VirtualDetector> detectors;

  /// Throws NodeGroupError, one line naming the detector, for a non-finite centre, a bad radius or
  /// rectangle, an empty or repeated name, or more than kMaxVirtualDetectors detectors.
  void validate() const;
  std::vector<std::string> names() const;
};

/// One frame's virtual-image values.
struct VirtualPixel {
  std::array<std::uint32_t, kMaxVirtualDetectors> counts{};  ///< electrons in detector d, d < detectors
  float com_x = 0.0F;  ///< mean column index - centre_col over all electrons (NaN: none)
  float com_y = 0.0F;  ///< mean row - centre_row
};

/// The detectors laid out on a frame: per pixel, the bits of the detectors it belongs to. Made once
/// per NodeGroup, read by every counting thread.
class VirtualImager {
 public:
  /// Throws NodeGroupError as VirtualDetectors::validate, or for a rectangle beyond the frame.
  VirtualImager(VirtualDetectors detectors, std::uint32_t frame_rows, std::uint32_t frame_cols);

  /// One frame's values; `events` are flat pixel indices within the frame.
  VirtualPixel pixel(const std::vector<std::uint32_t>& events) const;

  const VirtualDetectors& detectors() const { return detectors_; }
  std::size_t size() const { return detectors_.detectors.size(); }
  std::size_t frame_pixels() const { return masks_.size(); }

 private:
  VirtualDetectors detectors_;
  std::uint32_t frame_cols_;
  std::vector<std::uint16_t> masks_;  // frame_rows x frame_cols, bit d: detector d
};

/// A part of a scan's virtual images: one value per counted frame and detector, aligned with the
/// frames of the ScanResult that holds it, and the diffraction pattern summed over them.
struct VirtualImages {
  std::vector<std::string> names;                  ///< the detectors' names; empty until a frame is added
  std::vector<std::vector<std::uint32_t>> counts;  ///< counts[d][i]: frame i's electrons in detector d
  std::vector<float> com_x;
  std::vector<float> com_y;
  std::vector<std::uint64_t> diffraction;  ///< frame_rows x frame_cols, C order; empty until a frame is added

  /// Appends the frame whose events are given, and adds them to the diffraction pattern.
  VirtualPixel add(const VirtualImager& imager, const std::vector<std::uint32_t>& events);

  /// Appends another part's frames after these.
  void append(VirtualImages&& part);
};

}  // namespace sectorflow::consumer::nodegroup
