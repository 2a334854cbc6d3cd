// Virtual images: what the NodeGroups make of each frame's counted electrons as they are counted.
// Per frame, the per-frame kernels the configuration's analyses name (frame_kernel.hpp; the built-in
// ones: the electrons in each virtual detector, the centre of mass) each add a value to their named
// columns; per scan, the summed diffraction pattern. The detectors come from the [analysis]
// configuration table ([[analysis.virtual_detectors]]: disks, annuli, rectangles, masks, each
// named), with the pattern centre the kernels measure from.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
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

  /// Whether pixel (row, col) belongs to the detector (not for a mask: the kernel reads its pixels).
  bool contains(std::uint32_t row, std::uint32_t col) const;
};

/// The [analysis] table's detectors, and the pattern centre the kernels measure from (the centre of mass).
struct VirtualDetectors {
  double centre_row = 0.0;  ///< [analysis] centre_row (negative in the table: frame centre)
  double centre_col = 0.0;
  std::vector<VirtualDetector> detectors;

  /// Throws NodeGroupError, one line naming the detector, for a non-finite centre, a bad radius or
  /// rectangle, an empty or repeated name, or more than kMaxVirtualDetectors detectors.
  void validate() const;
  std::vector<std::string> names() const;
};

struct KernelChoice;
class FrameKernel;

/// The kernels a NodeGroup runs, made once for the frame and read by every counting thread.
class VirtualImager {
 public:
  /// Throws NodeGroupError as VirtualDetectors::validate, for a kernel no one registered, one named
  /// twice or two making a column of the same name, or what a kernel refuses (a rectangle beyond
  /// the frame, a missing setting).
  VirtualImager(VirtualDetectors detectors, const std::vector<KernelChoice>& kernels, std::uint32_t frame_rows,
                std::uint32_t frame_cols);
  VirtualImager(const VirtualImager&) = delete;
  VirtualImager& operator=(const VirtualImager&) = delete;
  ~VirtualImager();

  /// One frame's value of every column, kernel after kernel, into `values` (columns() of them);
  /// `events` are flat pixel indices within the frame.
  void image(const std::vector<std::uint32_t>& events, std::vector<float>& values) const;

  /// Every kernel's columns, in kernel order: the names of the values image() gives.
  const std::vector<std::string>& columns() const { return columns_; }
  const VirtualDetectors& detectors() const { return detectors_; }
  std::size_t frame_pixels() const { return frame_pixels_; }

 private:
  VirtualDetectors detectors_;
  std::size_t frame_pixels_;
  std::vector<std::unique_ptr<const FrameKernel>> kernels_;
  std::vector<std::size_t> first_column_;  // kernel k writes columns first_column_[k] ..
  std::vector<std::string> columns_;
};

/// A part of a scan's virtual images: per column one value per imaged frame, aligned with the
/// frames of the ScanResult that holds it, and the diffraction pattern summed over them.
struct VirtualImages {
  std::vector<std::string> names;           ///< the columns' names (VirtualImager::columns); empty until a frame is added
  std::vector<std::vector<float>> columns;  ///< columns[k][i]: frame i's value of column k
  std::vector<std::uint64_t> diffraction;   ///< frame_rows x frame_cols, C order; empty until a frame is added
  std::size_t frames = 0;                   ///< frames imaged

  /// Appends a frame: its `values` (VirtualImager::image) and its events to the diffraction pattern.
  void add(const VirtualImager& imager, const std::vector<float>& values, const std::vector<std::uint32_t>& events);

  /// Appends another part's frames after these.
  void append(VirtualImages&& part);
};

}  // namespace sectorflow::consumer::nodegroup
