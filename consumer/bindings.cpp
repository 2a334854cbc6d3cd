// Python face of the consumer: sectorflow._core.consumer.
#include "bindings.hpp"

namespace sectorflow::bindings {

void bind_counting(pybind11::module_& m);
void bind_nodegroup(pybind11::module_& m);

void bind_consumer(pybind11::module_& m) {
  bind_counting(m);
  bind_nodegroup(m);
}

}  // namespace sectorflow::bindings
