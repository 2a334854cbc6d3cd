// The virtual detectors' kernel: per frame, the electrons in each [[analysis.virtual_detectors]]
// (disks, annuli, rectangles, masks; virtual_images.hpp), one column per detector named as it.
// Per electron one look-up of the detectors its pixel lies in, a table made once per NodeGroup.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sectorflow/consumer/nodegroup/frame_kernel.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"

namespace sectorflow::consumer::nodegroup {
namespace {

class VirtualDetectorsKernel final : public FrameKernel {
 public:
  explicit VirtualDetectorsKernel(const KernelContext& context)
      : names_(context.detectors.names()),
        masks_(std::size_t{context.frame_rows} * context.frame_cols, 0) {
    const std::uint32_t frame_rows = context.frame_rows;
    const std::uint32_t frame_cols = context.frame_cols;
    const std::vector<VirtualDetector>& detectors = context.detectors.detectors;
    for (std::size_t d = 0; d < detectors.size(); ++d) {
      const VirtualDetector& detector = detectors[d];
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

  std::vector<std::string> columns() const override { return names_; }

  void add(const std::vector<std::uint32_t>& events, float* columns) const override {
    std::array<std::uint32_t, kMaxVirtualDetectors> counts{};
    for (const std::uint32_t event : events) {
      // Most electrons fall in one or two detectors: a loop over the set bits, not over the detectors.
      for (unsigned mask = masks_[event]; mask != 0; mask &= mask - 1) {
        ++counts[static_cast<std::size_t>(__builtin_ctz(mask))];
      }
    }
    for (std::size_t d = 0; d < names_.size(); ++d) columns[d] = static_cast<float>(counts[d]);
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::uint16_t> masks_;  // frame_rows x frame_cols, bit d: detector d
};

}  // namespace

SECTORFLOW_REGISTER_KERNEL("virtual_detectors", VirtualDetectorsKernel);

}  // namespace sectorflow::consumer::nodegroup
