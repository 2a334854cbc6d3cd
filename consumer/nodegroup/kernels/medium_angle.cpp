// The medium-angle annulus's kernel (analysis/medium_angle.py): per frame, the electrons at
// inner_px < distance <= outer_px from the pattern centre ([analysis] centre_row, centre_col), the
// ring between the bright-field disk and the dark-field annulus; column medium_angle. The field's
// pixel convention (analysis/SPEC.md "Pixel coordinates"), as an annulus virtual detector.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sectorflow/consumer/nodegroup/frame_kernel.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"

namespace sectorflow::consumer::nodegroup {
namespace {

class MediumAngle final : public FrameKernel {
 public:
  explicit MediumAngle(const KernelContext& context)
      : inside_(std::size_t{context.frame_rows} * context.frame_cols, 0) {
    const double inner = context.setting("inner_px");
    const double outer = context.setting("outer_px");
    if (!std::isfinite(inner) || !std::isfinite(outer) || inner < 0.0 || !(outer > inner)) {
      throw NodeGroupError("NodeGroup kernel '" + context.kernel + "': needs finite radii 0 <= inner_px < outer_px, "
                           "got inner_px = " + std::to_string(inner) + ", outer_px = " + std::to_string(outer));
    }
    for (std::uint32_t r = 0; r < context.frame_rows; ++r) {
      for (std::uint32_t c = 0; c < context.frame_cols; ++c) {
        const double dr = r - context.detectors.centre_row;
        const double dc = c - context.detectors.centre_col;
        const double d2 = dr * dr + dc * dc;
        inside_[std::size_t{r} * context.frame_cols + c] = d2 > inner * inner && d2 <= outer * outer;
      }
    }
  }

  std::vector<std::string> columns() const override { return {"medium_angle"}; }

  void add(const std::vector<std::uint32_t>& events, float* columns) const override {
    std::uint32_t count = 0;
    for (const std::uint32_t event : events) count += inside_[event];
    columns[0] = static_cast<float>(count);
  }

 private:
  std::vector<std::uint8_t> inside_;  // frame_rows x frame_cols: 1 in the ring
};

}  // namespace

SECTORFLOW_REGISTER_KERNEL("medium_angle", MediumAngle);

}  // namespace sectorflow::consumer::nodegroup
