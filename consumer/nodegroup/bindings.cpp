// Bindings of the NodeGroup data path: settings, the NodeGroup, its counters and scan results.
// ScanResult arrays (positions, events, offsets) are numpy views of the result's own vectors,
// valid as long as the ScanResult object lives (they keep it alive). Blocking calls release the
// GIL.
#include <pybind11/chrono.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"
#include "sectorflow/protocol/refusal.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {
namespace {

using namespace sectorflow::consumer::nodegroup;

template <typename T>
py::array_t<T> view(const std::vector<T>& values, const py::object& owner) {
  return py::array_t<T>({static_cast<py::ssize_t>(values.size())}, {static_cast<py::ssize_t>(sizeof(T))},
                        values.data(), owner);
}

py::dict counter_dict(const NodeGroupCounterValues& c) {
  py::dict d;
  d["messages"] = c.messages;
  d["bytes"] = c.bytes;
  d["info_messages"] = c.info_messages;
  d["repeated_infos"] = c.repeated_infos;
  py::dict malformed;
  for (std::size_t i = 0; i < protocol::kRefusalKinds; ++i) {
    malformed[protocol::to_string(static_cast<protocol::Refusal>(i))] = c.malformed.counts[i];
  }
  d["malformed"] = malformed;
  py::dict first;
  for (std::size_t i = 0; i < protocol::kRefusalKinds; ++i) {
    if (!c.malformed.first[i].empty()) first[protocol::to_string(static_cast<protocol::Refusal>(i))] = c.malformed.first[i];
  }
  d["first_malformed"] = first;  d["late_messages"] = c.late_messages;
  d["duplicate_sectors"] = c.duplicate_sectors;
  d["frames_complete"] = c.frames_complete;
  d["frames_incomplete"] = c.frames_incomplete;
  d["evicted_frames"] = c.evicted_frames;
  d["uncounted_frames"] = c.uncounted_frames;
  d["scans_finished"] = c.scans_finished;
  d["scans_timed_out"] = c.scans_timed_out;
  d["scans_evicted"] = c.scans_evicted;
  d["pool_slots"] = c.pool_slots;
  d["pool_slots_in_use"] = c.pool_slots_in_use;
  d["pool_slots_high_water"] = c.pool_slots_high_water;
  d["pool_bytes"] = c.pool_bytes;
  d["pool_bytes_high_water"] = c.pool_bytes_high_water;
  return d;
}

}  // namespace

void bind_nodegroup(py::module_& m) {
  py::register_exception<NodeGroupError>(m, "NodeGroupError",
                                         py::module_::import("sectorflow.errors").attr("SectorflowError"));

  py::class_<ThresholdSettings>(m, "ThresholdSettings", "How a scan's thresholds are chosen ([counting]).")
      .def(py::init([](std::uint32_t sample_frames, double background_sigma, double xray_sigma,
                       double background_threshold, double xray_threshold, std::uint32_t share_ms) {
             return ThresholdSettings{sample_frames, background_sigma, xray_sigma, background_threshold,
                                      xray_threshold, share_ms};
           }),
           py::kw_only(), py::arg("sample_frames"), py::arg("background_sigma"), py::arg("xray_sigma"),
           py::arg("background_threshold"), py::arg("xray_threshold"), py::arg("share_ms") = 0,
           "Every value from [counting] (settings_from): sample_frames is threshold_sample_frames.")
      .def_readonly("sample_frames", &ThresholdSettings::sample_frames)
      .def_readonly("background_sigma", &ThresholdSettings::background_sigma)
      .def_readonly("xray_sigma", &ThresholdSettings::xray_sigma)
      .def_readonly("background_threshold", &ThresholdSettings::background_threshold)
      .def_readonly("xray_threshold", &ThresholdSettings::xray_threshold)
      .def_readonly("share_ms", &ThresholdSettings::share_ms)
      .def_property_readonly("fixed", &ThresholdSettings::fixed);

  py::class_<VirtualDetector>(m, "VirtualDetector", "One virtual detector, frame pixels (virtual_images.hpp).")
      .def(py::init([](std::string name, const std::string& kind, double centre_row, double centre_col, double radius,
                       double inner, double outer, std::uint32_t row0, std::uint32_t col0, std::uint32_t rows,
                       std::uint32_t cols, py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast> mask,
                       std::string mask_file) {
             VirtualDetector d;
             if (kind == "disk") {
               d.kind = DetectorKind::kDisk;
             } else if (kind == "annulus") {
               d.kind = DetectorKind::kAnnulus;
             } else if (kind == "rectangle") {
               d.kind = DetectorKind::kRectangle;
             } else if (kind == "mask") {
               d.kind = DetectorKind::kMask;
               d.mask.assign(mask.data(), mask.data() + mask.size());
               d.mask_file = std::move(mask_file);
             } else {
               throw NodeGroupError("virtual detector '" + name + "': kind '" + kind +
                                    "' is none of disk, annulus, rectangle, mask");
             }
             d.name = std::move(name);
             d.centre_row = centre_row;
             d.centre_col = centre_col;
             d.radius = radius;
             d.inner = inner;
             d.outer = outer;
             d.row0 = row0;
             d.col0 = col0;
             d.rows = rows;
             d.cols = cols;
             return d;
           }),
           py::kw_only(), py::arg("name"), py::arg("kind"), py::arg("centre_row") = 0.0, py::arg("centre_col") = 0.0,
           py::arg("radius") = 0.0, py::arg("inner") = 0.0, py::arg("outer") = 0.0, py::arg("row0") = 0,
           py::arg("col0") = 0, py::arg("rows") = 0, py::arg("cols") = 0,
           py::arg("mask") = py::array_t<std::uint8_t>(0), py::arg("mask_file") = "",
           "mask: for kind 'mask', frame_rows * frame_cols values (C order), nonzero at the detector's pixels")
      .def_readonly("name", &VirtualDetector::name)
      .def_property_readonly("kind",
                             [](const VirtualDetector& d) {
                               switch (d.kind) {
                                 case DetectorKind::kDisk: return "disk";
                                 case DetectorKind::kAnnulus: return "annulus";
                                 case DetectorKind::kRectangle: return "rectangle";
                                 case DetectorKind::kMask: return "mask";
                               }
                               return "?";
                             })
      .def_readonly("centre_row", &VirtualDetector::centre_row)
      .def_readonly("centre_col", &VirtualDetector::centre_col)
      .def_readonly("radius", &VirtualDetector::radius)
      .def_readonly("inner", &VirtualDetector::inner)
      .def_readonly("outer", &VirtualDetector::outer)
      .def_readonly("row0", &VirtualDetector::row0)
      .def_readonly("col0", &VirtualDetector::col0)
      .def_readonly("rows", &VirtualDetector::rows)
      .def_readonly("cols", &VirtualDetector::cols)
      .def_readonly("mask_file", &VirtualDetector::mask_file)
      .def_property_readonly("pixels", [](const VirtualDetector& d) {
        const auto set = [](std::uint8_t v) { return v != 0; };
        return static_cast<std::size_t>(std::count_if(d.mask.begin(), d.mask.end(), set));
      }, "mask: the pixels it holds");

  py::class_<VirtualDetectors>(m, "VirtualDetectors",
                               "The virtual detectors of the [analysis] table, frame pixels (virtual_images.hpp).")
      .def(py::init([](double centre_row, double centre_col, std::vector<VirtualDetector> detectors) {
             VirtualDetectors d{centre_row, centre_col, std::move(detectors)};
             d.validate();
             return d;
           }),
           py::kw_only(), py::arg("centre_row"), py::arg("centre_col"), py::arg("detectors"))
      .def_readonly("centre_row", &VirtualDetectors::centre_row)
      .def_readonly("centre_col", &VirtualDetectors::centre_col)
      .def_readonly("detectors", &VirtualDetectors::detectors)
      .def_property_readonly("names", &VirtualDetectors::names);

  py::class_<KernelChoice>(m, "KernelChoice",
                           "A per-frame kernel of the NodeGroups' table to run, by name, with its analysis's "
                           "settings (frame_kernel.hpp).")
      .def(py::init([](std::string name, KernelSettings settings) { return KernelChoice{std::move(name), std::move(settings)}; }),
           py::arg("name"), py::arg("settings") = KernelSettings{})
      .def_readonly("name", &KernelChoice::name)
      .def_readonly("settings", &KernelChoice::settings)
      .def("__repr__", [](const KernelChoice& k) { return "KernelChoice('" + k.name + "')"; });
  m.def("frame_kernels", &frame_kernel_names, "The names of the NodeGroups' per-frame kernels (consumer/nodegroup/kernels/).");

  const NodeGroupSettings sd;  // only for what is not configuration: count, the kernels without an analysis plan
  m.def(
      "virtual_images",
      [](const VirtualDetectors& detectors, std::uint32_t frame_rows, std::uint32_t frame_cols,
         py::array_t<std::uint32_t, py::array::c_style> events, py::array_t<std::uint64_t, py::array::c_style> offsets,
         const std::vector<KernelChoice>& kernels) {
        const std::uint32_t* e = events.data();
        const std::uint64_t* o = offsets.data();
        const auto frames = static_cast<std::size_t>(std::max<py::ssize_t>(offsets.size() - 1, 0));
        if (frames > 0 && o[frames] > static_cast<std::uint64_t>(events.size())) {
          throw NodeGroupError("virtual_images: offsets reach past the events");
        }
        for (std::size_t f = 0; f < frames; ++f) {
          if (o[f] > o[f + 1]) throw NodeGroupError("virtual_images: offsets go backwards");
        }
        const std::size_t pixels = std::size_t{frame_rows} * frame_cols;
        for (py::ssize_t i = 0; i < events.size(); ++i) {
          if (e[i] >= pixels) throw NodeGroupError("virtual_images: an event lies outside the frame");
        }
        const VirtualImager imager(detectors, kernels, frame_rows, frame_cols);
        VirtualImages images;
        {
          py::gil_scoped_release release;
          std::vector<std::uint32_t> frame;
          std::vector<float> values;
          for (std::size_t f = 0; f < frames; ++f) {
            frame.assign(e + o[f], e + o[f + 1]);
            imager.image(frame, values);
            images.add(imager, values, frame);
          }
        }
        if (images.diffraction.empty()) images.diffraction.assign(pixels, 0);
        images.columns.resize(imager.columns().size());
        py::dict d;
        for (std::size_t k = 0; k < imager.columns().size(); ++k) {
          d[py::str(imager.columns()[k])] = py::array_t<float>(static_cast<py::ssize_t>(frames), images.columns[k].data());
        }
        d["diffraction"] = py::array_t<std::uint64_t>(static_cast<py::ssize_t>(pixels), images.diffraction.data());
        return d;
      },
      py::arg("detectors"), py::arg("frame_rows"), py::arg("frame_cols"), py::arg("events"), py::arg("offsets"),
      py::arg("kernels") = sd.kernels,
      "The virtual images of frames given as events (frame i's are events[offsets[i]:offsets[i + 1]]), computed "
      "as a NodeGroup computes them while counting with `kernels` (KernelChoice list; default the built-in "
      "ones): a dict of each kernel column's float32 value per frame, by name (the virtual detectors' counts, "
      "com_x, com_y, ...), and \"diffraction\", the flat summed pattern. Releases the GIL.");

  py::class_<NodeGroupSettings>(m, "NodeGroupSettings", "What one NodeGroup needs (see nodegroup_settings.hpp).")
      .def(py::init([](std::string uid, std::string host, const protocol::Geometry& geometry, std::uint32_t receivers,
                       std::uint32_t counting_threads, int recv_hwm, std::uint32_t pool_frames,
                       double scan_timeout_s, const ThresholdSettings& thresholds,
                       std::shared_ptr<consumer::counting::Calibration> calibration, std::vector<std::uint32_t> producer_threads,
                       bool count, std::uint64_t max_scan_positions, std::uint32_t max_open_scans,
                       std::optional<VirtualDetectors> detectors, std::vector<KernelChoice> kernels, bool live,
                       std::uint32_t live_buffer_frames, std::uint32_t aggregators) {
             NodeGroupSettings s;
             s.aggregators = aggregators;
             s.detectors = detectors;
             s.kernels = std::move(kernels);
             s.live = live;
             s.live_buffer_frames = live_buffer_frames;
             s.uid = std::move(uid);
             s.host = std::move(host);
             s.geometry = geometry;
             s.receivers = receivers;
             s.counting_threads = counting_threads;
             s.recv_hwm = recv_hwm;
             s.pool_frames = pool_frames;
             s.scan_timeout_s = scan_timeout_s;
             s.thresholds = thresholds;
             s.calibration = std::move(calibration);
             s.producer_threads = std::move(producer_threads);
             s.count = count;
             s.limits.max_positions = max_scan_positions;
             s.max_open_scans = max_open_scans;
             s.validate();
             return s;
           }),
           py::kw_only(), py::arg("uid"), py::arg("host"), py::arg("geometry"), py::arg("receivers"),
           py::arg("counting_threads"), py::arg("recv_hwm"), py::arg("pool_frames"), py::arg("scan_timeout_s"),
           py::arg("thresholds"), py::arg("calibration") = nullptr, py::arg("producer_threads"),
           py::arg("count") = sd.count, py::arg("max_scan_positions"), py::arg("max_open_scans"),
           py::arg("detectors") = std::nullopt, py::arg("kernels") = sd.kernels, py::arg("live") = false, py::arg("live_buffer_frames") = 0,
           py::arg("aggregators") = 1,
           "Every value but uid, calibration and count from the configuration (settings_from). count=False "
           "assembles frames without counting them (no events, no thresholds): the data path alone, for "
           "benchmarks. Raises NodeGroupError naming a setting that cannot work.")
      .def_readonly("uid", &NodeGroupSettings::uid)
      .def_readwrite("rcvbuf_bytes", &NodeGroupSettings::rcvbuf_bytes)
      .def_readonly("host", &NodeGroupSettings::host)
      .def_readonly("geometry", &NodeGroupSettings::geometry)
      .def_readonly("receivers", &NodeGroupSettings::receivers)
      .def_readonly("aggregators", &NodeGroupSettings::aggregators)
      .def_readwrite("aggregator_keys", &NodeGroupSettings::aggregator_keys,
                     "[security] with a tier: each member's public key, member order ([] : curve's server key).")
      .def_property_readonly("ports", &NodeGroupSettings::ports, "Data ports: receivers x aggregators.")
      .def_readonly("producer_threads", &NodeGroupSettings::producer_threads)
      .def_readonly("counting_threads", &NodeGroupSettings::counting_threads)
      .def_readonly("pool_frames", &NodeGroupSettings::pool_frames)
      .def_readonly("scan_timeout_s", &NodeGroupSettings::scan_timeout_s)
      .def_readonly("count", &NodeGroupSettings::count)
      .def_readonly("thresholds", &NodeGroupSettings::thresholds)
      .def_readonly("detectors", &NodeGroupSettings::detectors)
      .def_readonly("kernels", &NodeGroupSettings::kernels)
      .def_readonly("live", &NodeGroupSettings::live)
      .def_readonly("live_buffer_frames", &NodeGroupSettings::live_buffer_frames)
      .def_readwrite("drain_events", &NodeGroupSettings::drain_events,
                     "frames counted out while a scan runs once a counting thread holds this many events "
                     "(NodeGroup.take_counted); 0: the whole part at the scan's end")
      .def_readwrite("curve", &NodeGroupSettings::curve, "[security]: CurveClient (off by default).");

  py::class_<ScanResult>(m, "ScanResult",
                         "One NodeGroup's part of a finished scan. Array attributes are views owned by this object.")
      .def_readonly("scan_number", &ScanResult::scan_number)
      .def_readonly("scan_x", &ScanResult::scan_x)
      .def_readonly("scan_y", &ScanResult::scan_y)
      .def_readonly("routing", &ScanResult::routing)
      .def_property_readonly("positions", [](py::object self) { return view(self.cast<ScanResult&>().positions, self); })
      .def_property_readonly("events", [](py::object self) { return view(self.cast<ScanResult&>().events, self); })
      .def_property_readonly("offsets", [](py::object self) { return view(self.cast<ScanResult&>().offsets, self); })
      .def_property_readonly(
          "images",
          [](py::object self) {
            auto& images = self.cast<ScanResult&>().images;
            py::dict d;
            for (std::size_t k = 0; k < images.names.size() && k < images.columns.size(); ++k) {
              d[py::str(images.names[k])] = view(images.columns[k], self);
            }
            return d;
          },
          "the kernels' columns by name (the virtual detectors' counts, com_x, com_y, ...), float32, one value per "
          "frame (aligned with positions); empty without virtual images")
      .def_property_readonly("imaged", [](const ScanResult& r) { return r.images.frames; },
                             "frames imaged by the kernels: all of positions with virtual images, else 0")
      .def_property_readonly("diffraction",
                             [](py::object self) { return view(self.cast<ScanResult&>().images.diffraction, self); },
                             "summed diffraction pattern of the frames, flat (frame_rows * frame_cols); empty "
                             "without virtual images")
      .def_readonly("incomplete_positions", &ScanResult::incomplete_positions)
      .def_readonly("incomplete_missing_sectors", &ScanResult::incomplete_missing_sectors)
      .def_readonly("thresholds_known", &ScanResult::thresholds_known)
      .def_readonly("thresholds_shared", &ScanResult::thresholds_shared)
      .def_readonly("statistics", &ScanResult::statistics)
      .def_readonly("threshold_error", &ScanResult::threshold_error)
      .def_readonly("uncounted_frames", &ScanResult::uncounted_frames)
      .def_readonly("expected", &ScanResult::expected)
      .def_readonly("received", &ScanResult::received)
      .def_readonly("runs", &ScanResult::runs)
      .def_readonly("timed_out", &ScanResult::timed_out)
      .def_readonly("evicted", &ScanResult::evicted)
      .def_readonly("bytes", &ScanResult::bytes)
      .def_readonly("late_messages", &ScanResult::late_messages)
      .def_readonly("duplicate_sectors", &ScanResult::duplicate_sectors)
      .def_readonly("evicted_frames", &ScanResult::evicted_frames)
      .def_readonly("frames_complete", &ScanResult::frames_complete)
      .def_readonly("frames_incomplete", &ScanResult::frames_incomplete)
      .def_readonly("sectors_counted", &ScanResult::sectors_counted, "per receiver: its sectors in the frames counted")
      .def_readonly("first_message_s", &ScanResult::first_message_s)
      .def_readonly("last_message_s", &ScanResult::last_message_s)
      .def_readonly("finished_s", &ScanResult::finished_s);

  py::class_<ScanTracker::Progress>(m, "ScanProgress", "A scan being received.")
      .def_readonly("scan", &ScanTracker::Progress::scan)
      .def_readonly("received", &ScanTracker::Progress::received)
      .def_readonly("expected", &ScanTracker::Progress::expected, "-1 until every aggregator thread's info came")
      .def_readonly("arrived", &ScanTracker::Progress::arrived, "every part over (complete or timed out)");

  py::class_<NodeGroup>(m, "NodeGroup",
                        "R receiver threads and C counting threads; binds its ports and starts at once.")
      .def(py::init<NodeGroupSettings>(), py::arg("settings"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("settings", &NodeGroup::settings)
      .def_property_readonly("ports", &NodeGroup::ports)
      .def(
          "wait_scan",
          [](NodeGroup& g, double timeout_s) {
            std::optional<ScanResult> result;
            {
              py::gil_scoped_release release;
              result = g.wait_scan(std::chrono::milliseconds(static_cast<long>(timeout_s * 1000.0)));
            }
            return result;
          },
          py::arg("timeout_s"), "The next finished scan (a ScanResult), or None after timeout_s.")
      .def("take_counted", &NodeGroup::take_counted, py::arg("min_events"), py::call_guard<py::gil_scoped_release>(),
           "With settings.drain_events: per scan still counting, the frames counted out so far once they hold "
           "min_events events (ScanResults of frames only, no account); the frames not taken come with the scan's "
           "result.")
      .def("counters", [](const NodeGroup& g) { return counter_dict(g.counters()); },
           "Counters since start: messages, bytes, frames, pool slots and bytes, ...")
      .def("progress", &NodeGroup::progress, "Scans being received.")
      .def("take_samples", &NodeGroup::take_samples,
           "Shared thresholds: [(scan, SampleHistogram)] of the samples closed since the last call.")
      .def("adopt_thresholds", &NodeGroup::adopt_thresholds, py::arg("scan"), py::arg("statistics"),
           "Shared thresholds: count the scan with these ThresholdStatistics; False if it is not here or decided.")
      .def("close_aborted", &NodeGroup::close_aborted, py::arg("scan"), py::arg("receiver"), py::arg("forwarded"),
           "Aborted scan: aggregator thread `receiver` closed it having forwarded `forwarded` messages here; that "
           "port's part ends once they came, without waiting for scan_timeout_s.")
      .def(
          "take_live",
          [](NodeGroup& g) {
            LiveBatch batch;
            {
              py::gil_scoped_release release;
              batch = g.take_live();
            }
            const auto array = [](const auto& values) {
              using T = typename std::decay_t<decltype(values)>::value_type;
              return py::array_t<T>(static_cast<py::ssize_t>(values.size()), values.data());
            };
            py::dict d;
            d["scan"] = array(batch.scan);
            d["scan_x"] = array(batch.scan_x);
            d["scan_y"] = array(batch.scan_y);
            d["position"] = array(batch.position);
            py::dict columns;
            for (std::size_t k = 0; k < batch.names.size(); ++k) columns[py::str(batch.names[k])] = array(batch.columns[k]);
            d["columns"] = columns;
            d["offsets"] = array(batch.offsets);
            d["events"] = array(batch.events);
            d["dropped"] = batch.dropped;
            return d;
          },
          "The frames counted since the last call, for the live view: a dict of numpy arrays, one entry per frame "
          "(scan, scan_x, scan_y, position), columns (each kernel column's name -> float32 value per frame), "
          "offsets/events (frame i's "
          "events are events[offsets[i]:offsets[i + 1]]) and dropped (frames the full feed left out).")
      .def_property_readonly("live_dropped", &NodeGroup::live_dropped,
                             "Frames the live feed dropped since the NodeGroup started.")
      .def_property_readonly("scans_counting", &NodeGroup::scans_counting)
      .def_property_readonly("columns", &NodeGroup::columns,
                             "The kernels' columns each counted frame is imaged into, in order; [] without virtual images.")
      .def("stop", &NodeGroup::stop, py::call_guard<py::gil_scoped_release>(), "Stop and join the threads.");
}

}  // namespace sectorflow::bindings
