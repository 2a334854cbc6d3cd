#include "sectorflow/consumer/nodegroup/virtual_images.hpp"

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"

namespace sectorflow::consumer::nodegroup {

bool VirtualDetector::contains(std::uint32_t row, std::uint32_t col) const {
  if (kind == DetectorKind::kRectangle) {
    return row >= row0 && row - row0 < rows && col >= col0 && col - col0 < cols;
  }
  // The field's convention (analysis/SPEC.md "Pixel coordinates"): pixel (row, col) is the point
  // (row, col); a disk holds it at distance <= radius, a ring at inner < distance <= outer, as
  // LiberTEM's masks.circular and masks.ring.
  const double dr = row - centre_row;
  const double dc = col - centre_col;
  const double d2 = dr * dr + dc * dc;
  if (kind == DetectorKind::kDisk) return d2 <= radius * radius;
  return d2 > inner * inner && d2 <= outer * outer;
}

void VirtualDetectors::validate() const {
  if (!std::isfinite(centre_row) || !std::isfinite(centre_col)) {
    throw NodeGroupError("[analysis] centre_row/centre_col must be finite numbers");
  }
  if (detectors.size() > kMaxVirtualDetectors) {
    throw NodeGroupError("[analysis] virtual_detectors lists " + std::to_string(detectors.size()) + ", at most " +
                         std::to_string(kMaxVirtualDetectors) + " are allowed");
  }
  std::set<std::string> seen;
  for (const VirtualDetector& d : detectors) {
    const std::string who = "[analysis] virtual detector '" + d.name + "': ";
    if (d.name.empty()) throw NodeGroupError("[analysis] a virtual detector has no name");
    if (!seen.insert(d.name).second) throw NodeGroupError(who + "the name is used twice");
    const auto bad = [](double value) { return !std::isfinite(value) || value < 0.0; };
    const bool round = d.kind == DetectorKind::kDisk || d.kind == DetectorKind::kAnnulus;
    if (round && (!std::isfinite(d.centre_row) || !std::isfinite(d.centre_col))) {
      throw NodeGroupError(who + "its centre must be finite");
    }
    if (d.kind == DetectorKind::kDisk && (bad(d.radius) || d.radius == 0.0)) {
      throw NodeGroupError(who + "a disk's radius must be finite and above 0, got " + std::to_string(d.radius));
    }
    if (d.kind == DetectorKind::kAnnulus && (bad(d.inner) || bad(d.outer) || !(d.outer > d.inner))) {
      throw NodeGroupError(who + "an annulus needs finite radii with outer above inner, got inner = " +
                           std::to_string(d.inner) + ", outer = " + std::to_string(d.outer));
    }
    if (d.kind == DetectorKind::kMask && d.mask.empty()) throw NodeGroupError(who + "the mask is empty");
    if (d.kind == DetectorKind::kRectangle && (d.rows == 0 || d.cols == 0)) {
      throw NodeGroupError(who + "a rectangle needs at least 1 row and 1 column");
    }
  }
}

std::vector<std::string> VirtualDetectors::names() const {
  std::vector<std::string> out;
  for (const VirtualDetector& d : detectors) out.push_back(d.name);
  return out;
}

VirtualImager::VirtualImager(VirtualDetectors detectors, std::uint32_t frame_rows, std::uint32_t frame_cols)
    : detectors_(std::move(detectors)), frame_cols_(frame_cols), masks_(std::size_t{frame_rows} * frame_cols, 0) {
  detectors_.validate();
  for (std::size_t d = 0; d < detectors_.detectors.size(); ++d) {
    const VirtualDetector& detector = detectors_.detectors[d];
    if (detector.kind == DetectorKind::kRectangle &&
        (std::uint64_t{detector.row0} + detector.rows > frame_rows ||
         std::uint64_t{detector.col0} + detector.cols > frame_cols)) {
      throw NodeGroupError("[analysis] virtual detector '" + detector.name + "': the rectangle reaches past the " +
                           std::to_string(frame_rows) + " x " + std::to_string(frame_cols) + " frame");
    }
    const auto bit = static_cast<std::uint16_t>(1U << d);
    if (detector.kind == DetectorKind::kMask) {
      if (detector.mask.size() != masks_.size()) {
        throw NodeGroupError("[analysis] virtual detector '" + detector.name + "': the mask has " +
                             std::to_string(detector.mask.size()) + " pixels, the " + std::to_string(frame_rows) +
                             " x " + std::to_string(frame_cols) + " frame " + std::to_string(masks_.size()));
      }
      for (std::size_t i = 0; i < masks_.size(); ++i) {
        if (detector.mask[i] != 0) masks_[i] |= bit;
      }
      continue;
    }
    for (std::uint32_t r = 0; r < frame_rows; ++r) {
      for (std::uint32_t c = 0; c < frame_cols; ++c) {
        if (detector.contains(r, c)) masks_[std::size_t{r} * frame_cols + c] |= bit;
      }
    }
  }
}

VirtualPixel VirtualImager::pixel(const std::vector<std::uint32_t>& events) const {
  VirtualPixel pixel;
  double sum_row = 0.0;
  double sum_col = 0.0;
  for (const std::uint32_t event : events) {
    const std::uint32_t r = event / frame_cols_;
    sum_row += r;
    sum_col += event - r * frame_cols_;
    // Most electrons fall in one or two detectors: a loop over the set bits, not over the detectors.
    for (unsigned mask = masks_[event]; mask != 0; mask &= mask - 1) {
      ++pixel.counts[static_cast<std::size_t>(__builtin_ctz(mask))];
    }
  }
  if (events.empty()) {
    pixel.com_x = pixel.com_y = std::numeric_limits<float>::quiet_NaN();
  } else {
    const auto n = static_cast<double>(events.size());
    pixel.com_x = static_cast<float>(sum_col / n - detectors_.centre_col);
    pixel.com_y = static_cast<float>(sum_row / n - detectors_.centre_row);
  }
  return pixel;
}

VirtualPixel VirtualImages::add(const VirtualImager& imager, const std::vector<std::uint32_t>& events) {
  const VirtualPixel pixel = imager.pixel(events);
  if (names.empty() && counts.empty()) {
    names = imager.detectors().names();
    counts.resize(imager.size());
  }
  for (std::size_t d = 0; d < counts.size(); ++d) counts[d].push_back(pixel.counts[d]);
  com_x.push_back(pixel.com_x);
  com_y.push_back(pixel.com_y);
  if (diffraction.empty()) diffraction.assign(imager.frame_pixels(), 0);
  for (const std::uint32_t event : events) ++diffraction[event];
  return pixel;
}

void VirtualImages::append(VirtualImages&& part) {
  if (part.com_x.empty()) return;
  if (com_x.empty()) {
    *this = std::move(part);
    return;
  }
  for (std::size_t d = 0; d < counts.size() && d < part.counts.size(); ++d) {
    counts[d].insert(counts[d].end(), part.counts[d].begin(), part.counts[d].end());
  }
  com_x.insert(com_x.end(), part.com_x.begin(), part.com_x.end());
  com_y.insert(com_y.end(), part.com_y.begin(), part.com_y.end());
  for (std::size_t i = 0; i < part.diffraction.size(); ++i) diffraction[i] += part.diffraction[i];
}

}  // namespace sectorflow::consumer::nodegroup
