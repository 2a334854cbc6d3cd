// Python face of the detector simulator: the same C++ generator the producer runs.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/simulator/from_config.hpp"
#include "sectorflow/simulator/pacer.hpp"
#include "sectorflow/simulator/settings.hpp"
#include "sectorflow/simulator/simulator.hpp"
#include "sectorflow/simulator/specimen.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {
namespace {

using simulator::Simulator;
using simulator::SimulatorError;
using simulator::Specimen;
using simulator::SpecimenKind;
using simulator::SpecimenPoint;
using simulator::kRingInnerRadii;
using simulator::kRingOuterRadii;

py::dtype pixel_dtype(const protocol::Geometry& geometry) {
  return py::dtype("uint" + std::to_string(8 * geometry.itemsize));
}

// A buffer the C++ side may treat as one flat run of bytes.
bool c_contiguous(const py::buffer_info& info) {
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t i = info.ndim; i-- > 0;) {
    if (info.shape[i] != 1 && info.strides[i] != expected) return false;
    expected *= info.shape[i];
  }
  return true;
}

SpecimenKind specimen_kind(const std::string& name) {
  if (name == "none") return SpecimenKind::kNone;
  if (name == "crystal") return SpecimenKind::kCrystal;
  throw SimulatorError("simulator setting 'specimen' = \"" + name + "\": expected \"none\" or \"crystal\"");
}

std::string specimen_name(SpecimenKind kind) { return kind == SpecimenKind::kCrystal ? "crystal" : "none"; }

py::array new_image(const protocol::Geometry& geometry, std::size_t rows, std::size_t cols) {
  return py::array(pixel_dtype(geometry), {rows, cols});
}

}  // namespace

void bind_simulator(py::module_& m) {
  using namespace sectorflow::simulator;
  py::register_exception<SimulatorError>(m, "SimulatorError",
                                         py::module_::import("sectorflow.errors").attr("SectorflowError"));

  // The one mapping of [simulator] (from_config.hpp); raises SimulatorError naming a setting the generator
  // does not support.
  m.def("simulator_settings", &simulator_settings, py::arg("beamline"),
        "Every value of [simulator] but rate_hz and first_frame, checked as the generator needs.");
  py::class_<SimulatorSettings>(m, "SimulatorSettings",
                                "What the simulated detector looks like (the [simulator] configuration table).")
      .def(py::init<>(), "The defaults of settings.hpp; simulator_settings(beamline) fills them from [simulator].")
      .def_readonly("seed", &SimulatorSettings::seed)
      .def_readonly("dose_per_frame", &SimulatorSettings::dose_per_frame)
      .def_readonly("electron_adu", &SimulatorSettings::electron_adu)
      .def_readonly("electron_spread_px", &SimulatorSettings::electron_spread_px)
      .def_readonly("dark_mean_adu", &SimulatorSettings::dark_mean_adu)
      .def_readonly("dark_sigma_adu", &SimulatorSettings::dark_sigma_adu)
      .def_readonly("bright_field_radius_px", &SimulatorSettings::bright_field_radius_px)
      .def_readonly("dropped_fraction", &SimulatorSettings::dropped_fraction)
      .def_property_readonly("specimen", [](const SimulatorSettings& s) { return specimen_name(s.specimen); })
      .def_readonly("specimen_grain_px", &SimulatorSettings::specimen_grain_px)
      .def_readonly("specimen_bright_field", &SimulatorSettings::specimen_bright_field)
      .def_readonly("specimen_dark_field", &SimulatorSettings::specimen_dark_field)
      .def_readonly("specimen_shift_px", &SimulatorSettings::specimen_shift_px)
      .def("__repr__", [](const SimulatorSettings& s) {
        return "SimulatorSettings(seed=" + std::to_string(s.seed.value_or(0)) + ", dose_per_frame=" +
               std::to_string(s.dose_per_frame) + ", ...)";
      });

  py::class_<Simulator>(m, "Simulator",
                        "Deterministic 4D-STEM detector: sector s of frame f of scan n depends only on (seed, n, f, s).")
      .def(py::init<const SimulatorSettings&, const protocol::Geometry&>(), py::arg("settings"), py::arg("geometry"),
           "Raises SimulatorError for bad settings or an item size other than 1, 2 or 4.")
      .def_property_readonly("settings", &Simulator::settings)
      .def_property_readonly("geometry", &Simulator::geometry)
      .def("generate_sector",
           [](const Simulator& sim, std::uint32_t scan, std::uint32_t frame, std::uint32_t sector, py::buffer out,
              std::uint32_t scan_x) {
             const py::buffer_info info = out.request(/*writable=*/true);
             if (!c_contiguous(info)) throw simulator::SimulatorError("generate_sector: `out` must be C-contiguous");
             const auto bytes = static_cast<std::size_t>(info.size * info.itemsize);
             py::gil_scoped_release release;
             sim.generate_sector(scan, frame, sector, info.ptr, bytes, scan_x);
           },
           py::arg("scan"), py::arg("frame"), py::arg("sector"), py::arg("out"), py::kw_only(), py::arg("scan_x") = 0,
           "Write the sector into `out`, a writable C-contiguous buffer of exactly geometry.sector_bytes "
           "bytes that the caller owns and may reuse. Releases the GIL.")
      .def("sector",
           [](const Simulator& sim, std::uint32_t scan, std::uint32_t frame, std::uint32_t sector, std::uint32_t scan_x) {
             const protocol::Geometry& g = sim.geometry();
             py::array image = new_image(g, g.sector_rows, g.sector_cols);
             void* data = image.mutable_data();
             const std::size_t bytes = g.sector_bytes();
             py::gil_scoped_release release;
             sim.generate_sector(scan, frame, sector, data, bytes, scan_x);
             return image;
           },
           py::arg("scan"), py::arg("frame"), py::arg("sector"), py::kw_only(), py::arg("scan_x") = 0,
           "A new (sector_rows, sector_cols) array of the sector.")
      .def("frame",
           [](const Simulator& sim, std::uint32_t scan, std::uint32_t frame, std::uint32_t scan_x) {
             const protocol::Geometry& g = sim.geometry();
             py::array image = new_image(g, g.frame_rows, g.frame_cols);
             void* data = image.mutable_data();
             const std::size_t bytes = g.frame_pixels() * g.itemsize;
             py::gil_scoped_release release;
             sim.generate_frame(scan, frame, data, bytes, scan_x);
             return image;
           },
           py::arg("scan"), py::arg("frame"), py::kw_only(), py::arg("scan_x") = 0,
           "A new (frame_rows, frame_cols) array: every sector in place. With a specimen, `scan_x` (the scan's "
           "width) places frame f at probe position (f % scan_x, f // scan_x); 0 is refused then.")
      .def("dropped", &Simulator::dropped, py::arg("scan"), py::arg("frame"), py::arg("sector"),
           "Whether this sector is lost upstream (probability settings.dropped_fraction).")
      .def("electron_count", &Simulator::electron_count, py::arg("scan"), py::arg("frame"), py::kw_only(),
           py::arg("scan_x") = 0,
           "Ground truth: the number of electrons that struck the frame.")
      .def("electrons",
           [](const Simulator& sim, std::uint32_t scan, std::uint32_t frame, std::uint32_t scan_x) {
             const std::vector<Electron> electrons = sim.electrons(scan, frame, scan_x);
             py::array_t<double> positions({electrons.size(), std::size_t{2}});
             auto view = positions.mutable_unchecked<2>();
             for (std::size_t i = 0; i < electrons.size(); ++i) {
               view(i, 0) = electrons[i].row;
               view(i, 1) = electrons[i].col;
             }
             return positions;
           },
           py::arg("scan"), py::arg("frame"), py::kw_only(), py::arg("scan_x") = 0,
           "Ground truth: an (n, 2) float64 array of strike positions (row, col) in frame pixels; "
           "pixel (r, c) covers [r, r+1) x [c, c+1).");

  m.def(
      "specimen_maps",
      [](const SimulatorSettings& settings, std::uint32_t scan_x, std::uint32_t scan_y) {
        settings.validate();
        const Specimen specimen(settings);
        const double radius = settings.bright_field_radius_px;
        py::dict maps;
        const char* names[] = {"transmission", "scattered", "shift_row", "shift_col"};
        std::vector<py::array_t<double>> arrays;
        for (const char* name : names) {
          arrays.emplace_back(std::vector<py::ssize_t>{scan_y, scan_x});
          maps[name] = arrays.back();
        }
        std::vector<double*> data;
        for (auto& array : arrays) data.push_back(array.mutable_data());
        for (std::uint32_t y = 0; y < scan_y; ++y) {
          for (std::uint32_t x = 0; x < scan_x; ++x) {
            const SpecimenPoint p = specimen.at(x, y);
            const std::size_t i = std::size_t{y} * scan_x + x;
            data[0][i] = p.transmission;
            data[1][i] = p.scattered;
            data[2][i] = p.shift_row;
            data[3][i] = p.shift_col;
          }
        }
        maps["ring_inner_px"] = kRingInnerRadii * radius;
        maps["ring_outer_px"] = kRingOuterRadii * radius;
        return maps;
      },
      py::arg("settings"), py::arg("scan_x"), py::arg("scan_y"),
      "Ground truth of the specimen over a scan_x x scan_y scan: (scan_y, scan_x) float64 arrays 'transmission' "
      "(fraction of the dose reaching the detector), 'scattered' (of those, the fraction in the dark-field ring), "
      "'shift_row' and 'shift_col' (pattern shift, pixels), and the ring's radii 'ring_inner_px', 'ring_outer_px'. "
      "Without a specimen: transmission 1, the rest 0.");

  py::class_<Pacer>(m, "Pacer", "Paces frames to a rate: frame i is due at epoch + i / rate_hz.")
      .def(py::init<double>(), py::arg("rate_hz"), "0 means unpaced; the epoch is now.")
      .def_property_readonly("rate_hz", &Pacer::rate_hz)
      .def("restart", &Pacer::restart, "Make now the epoch.")
      .def("seconds_until", &Pacer::seconds_until, py::arg("index"),
           "Seconds from now until frame `index` is due (0 or less once it is; 0 unpaced).")
      .def("wait", &Pacer::wait, py::arg("index"), py::call_guard<py::gil_scoped_release>(),
           "Block until frame `index` is due (at once if unpaced or late). Releases the GIL.");
}

}  // namespace sectorflow::bindings
