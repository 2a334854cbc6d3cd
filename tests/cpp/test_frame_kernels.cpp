// The NodeGroups' per-frame kernel table (frame_kernel.hpp), linked from the static library as any
// program links it: every kernel file registered and kept, the columns laid out kernel after kernel,
// and the errors a configuration can cause.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sectorflow/consumer/nodegroup/frame_kernel.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"
#include "sectorflow/consumer/nodegroup/virtual_images.hpp"

namespace nodegroup = sectorflow::consumer::nodegroup;

namespace {

nodegroup::VirtualDetectors one_disk() {
  nodegroup::VirtualDetector disk;
  disk.name = "bright_field";
  disk.centre_row = 4.0;
  disk.centre_col = 4.0;
  disk.radius = 1.0;
  return nodegroup::VirtualDetectors{4.0, 4.0, {disk}};
}

std::string message_of(const std::vector<nodegroup::KernelChoice>& kernels) {
  try {
    const nodegroup::VirtualImager imager(one_disk(), kernels, 8, 8);
  } catch (const nodegroup::NodeGroupError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST(FrameKernels, EveryKernelFileIsInTheTableOfTheStaticLibrary) {
  const std::vector<std::string> names = nodegroup::frame_kernel_names();
  for (const char* name : {"centre_of_mass", "medium_angle", "virtual_detectors"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a name registered twice";
}

TEST(FrameKernels, ColumnsFollowTheKernelsInOrder) {
  const nodegroup::VirtualImager imager(
      one_disk(), {{"centre_of_mass", {}}, {"virtual_detectors", {}}, {"medium_angle", {{"inner_px", 1.0}, {"outer_px", 2.0}}}},
      8, 8);
  EXPECT_EQ(imager.columns(), (std::vector<std::string>{"com_x", "com_y", "bright_field", "medium_angle"}));
  // (4, 4) the centre: in the disk; (4, 6) at distance 2: in the ring; (0, 0) in neither.
  std::vector<float> values;
  imager.image({4 * 8 + 4, 4 * 8 + 6, 0}, values);
  ASSERT_EQ(values.size(), 4U);
  EXPECT_FLOAT_EQ(values[0], (4.0F + 6.0F + 0.0F) / 3.0F - 4.0F);
  EXPECT_FLOAT_EQ(values[1], (4.0F + 4.0F + 0.0F) / 3.0F - 4.0F);
  EXPECT_EQ(values[2], 1.0F);
  EXPECT_EQ(values[3], 1.0F);
  imager.image({}, values);
  EXPECT_TRUE(std::isnan(values[0]) && std::isnan(values[1]));
  EXPECT_EQ(values[2], 0.0F);
}

TEST(FrameKernels, ImagesAppendPartsColumnByColumn) {
  const nodegroup::VirtualImager imager(one_disk(), nodegroup::builtin_kernels(), 8, 8);
  std::vector<float> values;
  nodegroup::VirtualImages first;
  nodegroup::VirtualImages second;
  imager.image({36}, values);
  first.add(imager, values, {36});
  imager.image({36, 37}, values);
  second.add(imager, values, {36, 37});
  first.append(std::move(second));
  EXPECT_EQ(first.frames, 2U);
  EXPECT_EQ(first.names, (std::vector<std::string>{"bright_field", "com_x", "com_y"}));
  EXPECT_EQ(first.columns[0], (std::vector<float>{1.0F, 2.0F}));
  EXPECT_EQ(first.diffraction[36], 2U);
  EXPECT_EQ(first.diffraction[37], 1U);
}

TEST(FrameKernels, ErrorsNameTheKernel) {
  EXPECT_EQ(message_of({{"annulus", {}}}),
            "no NodeGroup kernel is named 'annulus'; registered: centre_of_mass, medium_angle, virtual_detectors");
  EXPECT_EQ(message_of({{"centre_of_mass", {}}, {"centre_of_mass", {}}}), "NodeGroup kernel 'centre_of_mass' is chosen twice");
  EXPECT_EQ(message_of({{"medium_angle", {{"inner_px", 1.0}}}}),
            "NodeGroup kernel 'medium_angle': its analysis gives no setting 'outer_px'");
  EXPECT_NE(message_of({{"medium_angle", {{"inner_px", 3.0}, {"outer_px", 2.0}}}}).find("0 <= inner_px < outer_px"),
            std::string::npos);
}
