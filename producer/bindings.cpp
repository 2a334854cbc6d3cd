#include "bindings.hpp"

namespace sectorflow::bindings {

void bind_producer(pybind11::module_& /*m*/) {}

}  // namespace sectorflow::bindings
