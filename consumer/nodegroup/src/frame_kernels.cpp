// The table of per-frame kernels: one entry per file of consumer/nodegroup/kernels/, listed by CMake
// in frame_kernel_list.inc (frame_kernel.hpp says why a generated list).
#include <algorithm>
#include <array>
#include <string>

#include "sectorflow/consumer/nodegroup/frame_kernel.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"

namespace sectorflow::consumer::nodegroup {

#define SECTORFLOW_KERNEL(stem) extern const KernelEntry SECTORFLOW_KERNEL_ENTRY(stem);
#include "frame_kernel_list.inc"
#undef SECTORFLOW_KERNEL

namespace {

#define SECTORFLOW_KERNEL(stem) &SECTORFLOW_KERNEL_ENTRY(stem),
const std::array kTable{
#include "frame_kernel_list.inc"
};
#undef SECTORFLOW_KERNEL

}  // namespace

double KernelContext::setting(const std::string& key) const {
  const auto found = settings.find(key);
  if (found == settings.end()) {
    throw NodeGroupError("NodeGroup kernel '" + kernel + "': its analysis gives no setting '" + key + "'");
  }
  return found->second;
}

std::vector<std::string> frame_kernel_names() {
  std::vector<std::string> names;
  for (const KernelEntry* entry : kTable) names.emplace_back(entry->name);
  return names;
}

std::unique_ptr<FrameKernel> make_frame_kernel(const KernelChoice& choice, const VirtualDetectors& detectors,
                                               std::uint32_t frame_rows, std::uint32_t frame_cols) {
  const auto found = std::find_if(kTable.begin(), kTable.end(),
                                  [&choice](const KernelEntry* entry) { return choice.name == entry->name; });
  if (found == kTable.end()) {
    std::string known;
    for (const std::string& name : frame_kernel_names()) known += (known.empty() ? "" : ", ") + name;
    throw NodeGroupError("no NodeGroup kernel is named '" + choice.name + "'; registered: " + known);
  }
  return (*found)->make(KernelContext{choice.name, detectors, frame_rows, frame_cols, choice.settings});
}

std::vector<KernelChoice> builtin_kernels() { return {{"virtual_detectors", {}}, {"centre_of_mass", {}}}; }

}  // namespace sectorflow::consumer::nodegroup
