#include "sectorflow/consumer/nodegroup/virtual_images.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "sectorflow/consumer/nodegroup/frame_kernel.hpp"
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

VirtualImager::VirtualImager(VirtualDetectors detectors, const std::vector<KernelChoice>& kernels,
                             std::uint32_t frame_rows, std::uint32_t frame_cols)
    : detectors_(std::move(detectors)), frame_pixels_(std::size_t{frame_rows} * frame_cols) {
  detectors_.validate();
  std::map<std::string, std::string> made_by;  // column -> kernel
  for (const KernelChoice& choice : kernels) {
    if (std::any_of(kernels.begin(), kernels.begin() + static_cast<std::ptrdiff_t>(kernels_.size()),
                    [&choice](const KernelChoice& other) { return other.name == choice.name; })) {
      throw NodeGroupError("NodeGroup kernel '" + choice.name + "' is chosen twice");
    }
    kernels_.push_back(make_frame_kernel(choice, detectors_, frame_rows, frame_cols));
    first_column_.push_back(columns_.size());
    for (std::string& column : kernels_.back()->columns()) {
      const auto [at, fresh] = made_by.emplace(column, choice.name);
      if (!fresh) {
        throw NodeGroupError("NodeGroup kernels '" + at->second + "' and '" + choice.name + "' both make column '" +
                             column + "'");
      }
      columns_.push_back(std::move(column));
    }
  }
}

VirtualImager::~VirtualImager() = default;

void VirtualImager::image(const std::vector<std::uint32_t>& events, std::vector<float>& values) const {
  values.resize(columns_.size());
  for (std::size_t k = 0; k < kernels_.size(); ++k) kernels_[k]->add(events, values.data() + first_column_[k]);
}

void VirtualImages::add(const VirtualImager& imager, const std::vector<float>& values,
                        const std::vector<std::uint32_t>& events) {
  if (frames == 0 && columns.empty()) {
    names = imager.columns();
    columns.resize(names.size());
  }
  for (std::size_t k = 0; k < columns.size(); ++k) columns[k].push_back(values[k]);
  ++frames;
  if (diffraction.empty()) diffraction.assign(imager.frame_pixels(), 0);
  for (const std::uint32_t event : events) ++diffraction[event];
}

void VirtualImages::append(VirtualImages&& part) {
  if (part.frames == 0) return;
  if (frames == 0) {
    *this = std::move(part);
    return;
  }
  for (std::size_t k = 0; k < columns.size() && k < part.columns.size(); ++k) {
    columns[k].insert(columns[k].end(), part.columns[k].begin(), part.columns[k].end());
  }
  frames += part.frames;
  for (std::size_t i = 0; i < part.diffraction.size(); ++i) diffraction[i] += part.diffraction[i];
}

}  // namespace sectorflow::consumer::nodegroup
