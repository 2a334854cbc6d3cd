// Bindings of electron counting: declarations, numpy conversions, GIL release, CountingError.
// Frames cross as numpy uint16 arrays read in place (no copy; the caller keeps them alive during
// the call). Events come back as numpy arrays that own their memory (moved, not copied, from the
// C++ vectors).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "sectorflow/consumer/counting/batch_counter.hpp"
#include "sectorflow/consumer/counting/calibration.hpp"
#include "sectorflow/consumer/counting/electron_counter.hpp"
#include "sectorflow/consumer/counting/errors.hpp"
#include "sectorflow/consumer/counting/thresholds.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {
namespace {

namespace counting = consumer::counting;
using counting::CountingError;
using counting::FrameShape;

std::string shape_of(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    s += (i ? ", " : "") + std::to_string(a.shape(i));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

std::string dtype_of(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// A C-contiguous array of T whose trailing two dimensions are the frame shape.
template <typename T>
const T* checked(const py::array& a, const FrameShape& shape, const char* what, py::ssize_t ndim) {
  if (!a.dtype().is(py::dtype::of<T>())) {
    throw CountingError(std::string(what) + " has dtype " + dtype_of(a) + ", expected " +
                        py::str(py::dtype::of<T>()).cast<std::string>());
  }
  const bool frame_dims = a.ndim() == ndim && a.shape(ndim - 2) == static_cast<py::ssize_t>(shape.rows) &&
                          a.shape(ndim - 1) == static_cast<py::ssize_t>(shape.cols);
  if (!frame_dims) {
    throw CountingError(std::string(what) + " has shape " + shape_of(a) + ", expected " +
                        (ndim == 3 ? "(n, " : "(") + std::to_string(shape.rows) + ", " + std::to_string(shape.cols) +
                        ")");
  }
  if (!(a.flags() & py::array::c_style)) {
    throw CountingError(std::string(what) + " is not C-contiguous; pass numpy.ascontiguousarray(...)");
  }
  return static_cast<const T*>(a.data());
}

// Frames as a 3-D uint16 array (n, rows, cols) or a sequence of 2-D uint16 arrays. The arrays in
// `keep` stay referenced while the pointers are used.
std::vector<const std::uint16_t*> frame_pointers(const py::object& frames, const FrameShape& shape,
                                                 std::vector<py::array>& keep) {
  std::vector<const std::uint16_t*> pointers;
  if (py::isinstance<py::array>(frames) && py::reinterpret_borrow<py::array>(frames).ndim() != 2) {
    const auto stack = py::reinterpret_borrow<py::array>(frames);
    const std::uint16_t* base = checked<std::uint16_t>(stack, shape, "frames", 3);
    keep.push_back(stack);
    for (py::ssize_t i = 0; i < stack.shape(0); ++i) {
      pointers.push_back(base + static_cast<std::size_t>(i) * shape.pixels());
    }
    return pointers;
  }
  if (py::isinstance<py::array>(frames)) {
    throw CountingError("frames is one 2-D frame; pass a 3-D array (n, rows, cols) or a list of frames");
  }
  if (!py::isinstance<py::sequence>(frames) || py::isinstance<py::str>(frames)) {
    throw CountingError("frames must be a 3-D uint16 array or a sequence of 2-D uint16 arrays, got " +
                        py::str(py::type::of(frames).attr("__name__")).cast<std::string>());
  }
  std::size_t index = 0;
  for (const py::handle item : frames) {
    if (!py::isinstance<py::array>(item)) {
      throw CountingError("frames[" + std::to_string(index) + "] is a " +
                          py::str(py::type::of(item).attr("__name__")).cast<std::string>() +
                          ", expected a numpy uint16 array");
    }
    const auto frame = py::reinterpret_borrow<py::array>(item);
    const std::string what = "frames[" + std::to_string(index) + "]";
    pointers.push_back(checked<std::uint16_t>(frame, shape, what.c_str(), 2));
    keep.push_back(frame);
    ++index;
  }
  return pointers;
}

// A numpy array that takes over a vector's buffer.
template <typename T>
py::array_t<T> to_numpy(std::vector<T>&& values) {
  auto owner = std::make_unique<std::vector<T>>(std::move(values));
  const auto size = static_cast<py::ssize_t>(owner->size());
  T* data = owner->data();
  py::capsule capsule(owner.get(), [](void* p) { delete static_cast<std::vector<T>*>(p); });
  owner.release();
  return py::array_t<T>({size}, {static_cast<py::ssize_t>(sizeof(T))}, data, capsule);
}

std::vector<float> optional_map(const py::object& map, const FrameShape& shape, const char* what) {
  if (map.is_none()) {
    return {};
  }
  if (!py::isinstance<py::array>(map)) {
    throw CountingError(std::string(what) + " must be a numpy float32 array or None");
  }
  const auto a = py::reinterpret_borrow<py::array>(map);
  const float* data = checked<float>(a, shape, what, 2);
  return std::vector<float>(data, data + shape.pixels());
}

// ElectronCounter is not thread-safe and Python threads may share one while the GIL is released.
struct LockedCounter {
  counting::ElectronCounter counter;
  std::mutex mutex;
};

}  // namespace

void bind_counting(py::module_& m) {
  using namespace sectorflow::consumer::counting;
  py::register_exception<CountingError>(m, "CountingError",
                                        py::module_::import("sectorflow.errors").attr("SectorflowValueError"));

  py::class_<FrameShape>(m, "FrameShape", "The shape of one detector frame (rows, cols).")
      .def(py::init([](std::uint32_t rows, std::uint32_t cols) {
             FrameShape s{rows, cols};
             s.validate();
             return s;
           }),
           py::arg("rows"), py::arg("cols"))
      .def_readonly("rows", &FrameShape::rows)
      .def_readonly("cols", &FrameShape::cols)
      .def_property_readonly("pixels", &FrameShape::pixels)
      .def("__eq__", &FrameShape::operator==, py::is_operator())
      .def("__repr__", [](const FrameShape& s) { return "FrameShape(" + s.str() + ")"; });

  py::class_<Calibration, std::shared_ptr<Calibration>>(
      m, "Calibration",
      "Frame shape and optional per-pixel maps: a dark reference subtracted and a gain factor multiplied "
      "(stempy's C++ convention; stempy's Python gain is its reciprocal). Both are copied.")
      .def(py::init([](const FrameShape& shape, const py::object& dark_reference, const py::object& gain_factor) {
             return std::make_shared<Calibration>(shape, optional_map(dark_reference, shape, "dark_reference"),
                                                  optional_map(gain_factor, shape, "gain_factor"));
           }),
           py::arg("shape"), py::kw_only(), py::arg("dark_reference") = py::none(),
           py::arg("gain_factor") = py::none())
      .def_property_readonly("shape", &Calibration::shape)
      .def_property_readonly("has_dark_reference", &Calibration::has_dark_reference)
      .def_property_readonly("has_gain", &Calibration::has_gain);

  py::class_<ThresholdStatistics>(m, "ThresholdStatistics",
                                  "Every statistic stempy reports for its thresholds, under its metadata names.")
      .def(py::init<>())
      .def_readwrite("threshold_calculated", &ThresholdStatistics::threshold_calculated)
      .def_readwrite("background_threshold", &ThresholdStatistics::background_threshold)
      .def_readwrite("x_ray_threshold", &ThresholdStatistics::x_ray_threshold)
      .def_readwrite("number_of_samples", &ThresholdStatistics::number_of_samples)
      .def_readwrite("min_sample", &ThresholdStatistics::min_sample)
      .def_readwrite("max_sample", &ThresholdStatistics::max_sample)
      .def_readwrite("mean", &ThresholdStatistics::mean)
      .def_readwrite("variance", &ThresholdStatistics::variance)
      .def_readwrite("std_dev", &ThresholdStatistics::std_dev)
      .def_readwrite("number_of_bins", &ThresholdStatistics::number_of_bins)
      .def_readwrite("x_ray_threshold_n_sigma", &ThresholdStatistics::x_ray_threshold_n_sigma)
      .def_readwrite("background_threshold_n_sigma", &ThresholdStatistics::background_threshold_n_sigma)
      .def_readwrite("optimized_mean", &ThresholdStatistics::optimized_mean)
      .def_readwrite("optimized_std_dev", &ThresholdStatistics::optimized_std_dev)
      .def("__repr__", [](const ThresholdStatistics& s) {
        return "ThresholdStatistics(background_threshold=" + std::to_string(s.background_threshold) +
               ", x_ray_threshold=" + std::to_string(s.x_ray_threshold) + ", optimized_mean=" +
               std::to_string(s.optimized_mean) + ", optimized_std_dev=" + std::to_string(s.optimized_std_dev) + ")";
      });

  py::class_<SampleHistogram>(m, "SampleHistogram",
                              "A threshold sample's sums and one count per value: samples of one scan merge "
                              "into the sample of all their frames (pickles, for MPI).")
      .def(py::init<>())
      .def_readonly("frames", &SampleHistogram::frames)
      .def_readonly("pixels", &SampleHistogram::pixels)
      .def("merge", &SampleHistogram::merge, py::arg("other"), "Adds other's frames.")
      .def(
          "statistics",
          [](const SampleHistogram& h, double background_threshold_n_sigma, double x_ray_threshold_n_sigma) {
            return h.statistics({background_threshold_n_sigma, x_ray_threshold_n_sigma});
          },
          py::arg("background_threshold_n_sigma"), py::arg("x_ray_threshold_n_sigma"),
          "The statistics of its frames, as calculate_thresholds computes them.")
      .def(py::pickle(
          [](const SampleHistogram& h) { return py::make_tuple(h.frames, h.pixels, h.min, h.sum, h.counts); },
          [](const py::tuple& t) {
            return SampleHistogram{t[0].cast<std::uint64_t>(), t[1].cast<std::uint64_t>(), t[2].cast<std::int64_t>(),
                                   t[3].cast<std::int64_t>(), t[4].cast<std::vector<std::uint64_t>>()};
          }));

  m.def(
      "calculate_thresholds",
      [](const py::object& frames, const Calibration& calibration, double background_threshold_n_sigma,
         double x_ray_threshold_n_sigma) {
        std::vector<py::array> keep;
        const auto pointers = frame_pointers(frames, calibration.shape(), keep);
        py::gil_scoped_release release;
        return calculate_thresholds(pointers, calibration, {background_threshold_n_sigma, x_ray_threshold_n_sigma});
      },
      py::arg("frames"), py::arg("calibration"), py::kw_only(), py::arg("background_threshold_n_sigma") = 4.0,
      py::arg("x_ray_threshold_n_sigma") = 10.0,
      "Thresholds from a sample: every frame given (3-D uint16 array or list of 2-D) is used once.");

  py::enum_<RowDark>(m, "RowDark", "Row-dark correction: none, or scale each half row by its mean or median.")
      .value("none", RowDark::kNone)
      .value("mean", RowDark::kMean)
      .value("median", RowDark::kMedian);

  py::class_<CountingOptions>(m, "CountingOptions", "Thresholds (ADU) and the row-dark correction of counting.")
      .def(py::init([](double background_threshold, double x_ray_threshold, RowDark row_dark, double optimized_mean) {
             CountingOptions o{background_threshold, x_ray_threshold, row_dark, optimized_mean};
             o.validate();
             return o;
           }),
           py::kw_only(), py::arg("background_threshold"),
           py::arg("x_ray_threshold") = std::numeric_limits<double>::infinity(), py::arg("row_dark") = RowDark::kNone,
           py::arg("optimized_mean") = 0.0)
      .def_static("from_statistics", &CountingOptions::from, py::arg("statistics"),
                  py::arg("row_dark") = RowDark::kNone)
      .def_readonly("background_threshold", &CountingOptions::background_threshold)
      .def_readonly("x_ray_threshold", &CountingOptions::x_ray_threshold)
      .def_readonly("row_dark", &CountingOptions::row_dark)
      .def_readonly("optimized_mean", &CountingOptions::optimized_mean);

  py::class_<LockedCounter>(m, "ElectronCounter", "Counts one frame at a time (stempy's electron_count_frame).")
      .def(py::init([](std::shared_ptr<Calibration> calibration, const CountingOptions& options) {
             return new LockedCounter{ElectronCounter(std::move(calibration), options), {}};
           }),
           py::arg("calibration"), py::arg("options"))
      .def_property_readonly("shape", [](const LockedCounter& c) { return c.counter.shape(); })
      .def_property_readonly("options", [](const LockedCounter& c) { return c.counter.options(); })
      .def(
          "count",
          [](LockedCounter& c, const py::array& frame) {
            const std::uint16_t* pixels = checked<std::uint16_t>(frame, c.counter.shape(), "frame", 2);
            std::vector<std::uint32_t> events;
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> lock(c.mutex);
              c.counter.count(pixels, events);
            }
            return to_numpy(std::move(events));
          },
          py::arg("frame"),
          "Counts a C-contiguous uint16 (rows, cols) frame, read in place; returns the ascending flat "
          "indices (row * cols + col) as a new uint32 array.");

  py::class_<BatchCounter>(m, "BatchCounter", "Counts many frames with several threads (the caller's included).")
      .def(py::init([](const LockedCounter& prototype, unsigned threads) {
             return new BatchCounter(prototype.counter, threads);
           }),
           py::arg("counter"), py::arg("threads"))
      .def_property_readonly("threads", &BatchCounter::threads)
      .def_property_readonly("shape", &BatchCounter::shape)
      .def(
          "count",
          [](BatchCounter& b, const py::object& frames) {
            std::vector<py::array> keep;
            const auto pointers = frame_pointers(frames, b.shape(), keep);
            std::vector<std::uint32_t> flat;
            std::vector<std::uint64_t> offsets;
            {
              py::gil_scoped_release release;
              b.count_flat(pointers, flat, offsets);
            }
            return py::make_tuple(to_numpy(std::move(flat)), to_numpy(std::move(offsets)));
          },
          py::arg("frames"),
          "Counts a 3-D uint16 array (n, rows, cols) or a list of 2-D frames, read in place. Returns "
          "(events, offsets): frame i's events are events[offsets[i]:offsets[i + 1]].");
}

}  // namespace sectorflow::bindings
