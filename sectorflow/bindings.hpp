// The binding entry point of each component, called by _core.cpp to fill its submodule.
// Bindings are thin: declarations, conversions, GIL release and exception translation only.
#pragma once

#include <cstddef>
#include <string>

#include <pybind11/pybind11.h>

namespace sectorflow::bindings {

/// The bytes of any Python buffer (bytes, bytearray, memoryview), copied: what a C++ decoder takes.
inline std::string bytes_of(const pybind11::buffer& buffer) {
  const pybind11::buffer_info info = buffer.request();
  return std::string(static_cast<const char*>(info.ptr), static_cast<std::size_t>(info.size * info.itemsize));
}

void bind_protocol(pybind11::module_& m);
void bind_security(pybind11::module_& m);
void bind_configs(pybind11::module_& m);
void bind_simulator(pybind11::module_& m);
void bind_kvstore(pybind11::module_& m);
void bind_producer(pybind11::module_& m);
void bind_aggregator(pybind11::module_& m);
void bind_counting(pybind11::module_& m);
void bind_nodegroup(pybind11::module_& m);

}  // namespace sectorflow::bindings
