#include "bindings.hpp"

namespace sectorflow::bindings {

void bind_aggregator(pybind11::module_& /*m*/) {}

}  // namespace sectorflow::bindings
