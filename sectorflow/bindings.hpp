// The binding entry point of each component, called by _core.cpp to fill its submodule.
// Bindings are thin: declarations, conversions, GIL release and exception translation only.
#pragma once

#include <pybind11/pybind11.h>

namespace sectorflow::bindings {

void bind_protocol(pybind11::module_& m);
void bind_simulator(pybind11::module_& m);
void bind_kvstore(pybind11::module_& m);
void bind_producer(pybind11::module_& m);
void bind_aggregator(pybind11::module_& m);
void bind_counting(pybind11::module_& m);
void bind_nodegroup(pybind11::module_& m);

}  // namespace sectorflow::bindings
