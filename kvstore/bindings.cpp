#include "bindings.hpp"

namespace sectorflow::bindings {

void bind_kvstore(pybind11::module_& /*m*/) {}

}  // namespace sectorflow::bindings
