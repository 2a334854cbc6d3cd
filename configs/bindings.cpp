// Python face of sectorflow::configs: a Beamline, what the components' C++ mappings of their option
// structs read (sectorflow/<component>/from_config.hpp). The services make one from their loaded
// Config (sectorflow.configs.beamline_of), so that each key reaches its C++ struct by one mapping.
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "sectorflow/configs/beamline.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {

void bind_configs(py::module_& m) {
  // The loader's own ConfigError, imported when first raised: sectorflow.configs does not import the core.
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const configs::ConfigError& e) {
      const py::object type = py::module_::import("sectorflow.configs").attr("ConfigError");
      PyErr_SetString(type.ptr(), e.what());
    }
  });

  py::class_<configs::Beamline>(m, "Beamline", "A beamline file over the compiled-in defaults table (beamline.hpp).")
      .def_static("parse", &configs::Beamline::parse, py::arg("text"), py::arg("source"),
                  "TOML text; raises ConfigError for bad TOML, an unknown key or a value of another type.")
      .def_property_readonly("source", &configs::Beamline::source)
      .def_property_readonly("receivers", &configs::Beamline::receivers)
      .def("integer", &configs::Beamline::integer, py::arg("key"))
      .def("number", &configs::Beamline::number, py::arg("key"))
      .def("text", &configs::Beamline::text, py::arg("key"))
      .def("boolean", &configs::Beamline::boolean, py::arg("key"))
      .def("texts", &configs::Beamline::texts, py::arg("key"));
}

}  // namespace sectorflow::bindings
