// The NodeGroups' per-frame kernels: the C++ side of the analysis plug-in point (analysis/SPEC.md).
// A kernel names its per-frame columns and adds one value to each for every counted frame, from the
// frame's events; the counting threads run the kernels the configuration's analyses name
// (NodeGroupSettings::kernels), and everything downstream (ScanResult, the live feed, the bindings,
// the live wire, the file) carries their columns by name. A kernel is one file in
// consumer/nodegroup/kernels/ ending in one line, as odin-data's frame-processor plugins register:
//
//   SECTORFLOW_REGISTER_KERNEL("medium_angle", MediumAngle);
//
// Why a generated list and not a static registrar object: the kernels are part of a STATIC library,
// and a linker only takes an archive's object that resolves a symbol someone needs, so a registrar
// nobody references would be dropped (with it the kernel) from every program and from _core alike.
// CMake lists the files of kernels/ (frame_kernel_list.inc); the table (src/frame_kernels.cpp)
// references each file's entry by name, which pulls every kernel in, installed library included, and
// the entries are constants, so no static-initialisation order is involved.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sectorflow/consumer/nodegroup/virtual_images.hpp"

namespace sectorflow::consumer::nodegroup {

/// A kernel's settings: its analysis's (analysis/<name>.py `settings`), numbers by key.
using KernelSettings = std::map<std::string, double>;

/// A kernel to run, by its registered name, with its analysis's settings.
struct KernelChoice {
  std::string name;
  KernelSettings settings;
};

/// What a kernel is made with, once per NodeGroup.
struct KernelContext {
  std::string kernel;                 ///< its registered name (for messages)
  const VirtualDetectors& detectors;  ///< [analysis]: the virtual detectors and the pattern centre
  std::uint32_t frame_rows;
  std::uint32_t frame_cols;
  const KernelSettings& settings;

  /// The setting `key`; throws NodeGroupError naming the kernel and the key when it is not given.
  double setting(const std::string& key) const;
};

/// One per-frame kernel. Made once per NodeGroup and shared by its counting threads: add is const.
class FrameKernel {
 public:
  FrameKernel() = default;
  FrameKernel(const FrameKernel&) = delete;
  FrameKernel& operator=(const FrameKernel&) = delete;
  virtual ~FrameKernel() = default;

  /// Its columns' names, in order (the outputs' `live` names of its analysis).
  virtual std::vector<std::string> columns() const = 0;

  /// Writes one frame's value of each column to columns[0 .. columns().size()); `events` are the
  /// frame's flat pixel indices (row x frame_cols + col), each inside the frame. Values are float32:
  /// a count of electrons is exact up to 2^24 a frame, beyond any frame's pixels here.
  virtual void add(const std::vector<std::uint32_t>& events, float* columns) const = 0;
};

/// One entry of the table: a kernel's name and how it is made (throws NodeGroupError for settings
/// it cannot work with).
struct KernelEntry {
  const char* name;
  std::unique_ptr<FrameKernel> (*make)(const KernelContext& context);
};

/// Every registered kernel's name, in the table's order.
std::vector<std::string> frame_kernel_names();

/// The kernel `choice` names, made for `detectors` and the frame; throws NodeGroupError naming the
/// registered kernels for a name none has.
std::unique_ptr<FrameKernel> make_frame_kernel(const KernelChoice& choice, const VirtualDetectors& detectors,
                                               std::uint32_t frame_rows, std::uint32_t frame_cols);

/// The kernels a NodeGroup runs when its settings name none: the built-in analyses' (analysis/builtin.py).
std::vector<KernelChoice> builtin_kernels();

template <typename Kernel>
std::unique_ptr<FrameKernel> make_kernel(const KernelContext& context) {
  return std::make_unique<Kernel>(context);
}

}  // namespace sectorflow::consumer::nodegroup

#define SECTORFLOW_KERNEL_ENTRY_CAT(a, b) a##b
#define SECTORFLOW_KERNEL_ENTRY(stem) SECTORFLOW_KERNEL_ENTRY_CAT(frame_kernel_, stem)

/// Registers `Kernel` (constructed from a KernelContext) as `name`. Written once at the end of its
/// file in consumer/nodegroup/kernels/, in namespace sectorflow::consumer::nodegroup (outside an
/// anonymous namespace: the table links to the entry); CMake defines SECTORFLOW_KERNEL_STEM as the
/// file's stem, which names the entry.
#define SECTORFLOW_REGISTER_KERNEL(name, Kernel)                                                         \
  extern const ::sectorflow::consumer::nodegroup::KernelEntry SECTORFLOW_KERNEL_ENTRY(SECTORFLOW_KERNEL_STEM); \
  const ::sectorflow::consumer::nodegroup::KernelEntry SECTORFLOW_KERNEL_ENTRY(SECTORFLOW_KERNEL_STEM) {        \
    name, &::sectorflow::consumer::nodegroup::make_kernel<Kernel>                                        \
  }
