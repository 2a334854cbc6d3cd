#include "bindings.hpp"

namespace sectorflow::bindings {

void bind_consumer(pybind11::module_& /*m*/) {}

}  // namespace sectorflow::bindings
