#include "bindings.hpp"

namespace sectorflow::bindings {

void bind_simulator(pybind11::module_& /*m*/) {}

}  // namespace sectorflow::bindings
