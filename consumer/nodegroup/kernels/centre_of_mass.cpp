// The centre of mass's kernel: per frame, the mean (column, row) of its electrons less the pattern
// centre ([analysis] centre_col, centre_row), columns com_x and com_y; NaN for a frame without
// electrons (analysis/SPEC.md "Pixel coordinates").
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sectorflow/consumer/nodegroup/frame_kernel.hpp"

namespace sectorflow::consumer::nodegroup {
namespace {

class CentreOfMass final : public FrameKernel {
 public:
  explicit CentreOfMass(const KernelContext& context)
      : centre_row_(context.detectors.centre_row),
        centre_col_(context.detectors.centre_col),
        frame_cols_(context.frame_cols) {}

  std::vector<std::string> columns() const override { return {"com_x", "com_y"}; }

  void add(const std::vector<std::uint32_t>& events, float* columns) const override {
    if (events.empty()) {
      columns[0] = columns[1] = std::numeric_limits<float>::quiet_NaN();
      return;
    }
    double sum_row = 0.0;
    double sum_col = 0.0;
    for (const std::uint32_t event : events) {
      const std::uint32_t r = event / frame_cols_;
      sum_row += r;
      sum_col += event - r * frame_cols_;
    }
    const auto n = static_cast<double>(events.size());
    columns[0] = static_cast<float>(sum_col / n - centre_col_);
    columns[1] = static_cast<float>(sum_row / n - centre_row_);
  }

 private:
  double centre_row_;
  double centre_col_;
  std::uint32_t frame_cols_;
};

}  // namespace

SECTORFLOW_REGISTER_KERNEL("centre_of_mass", CentreOfMass);

}  // namespace sectorflow::consumer::nodegroup
