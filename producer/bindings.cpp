// Python face of the producer: the C++ Producer, its sources and the simulator adapter. Anything
// that sends or reads releases the GIL; payloads given from Python are copied (a zero-copy release
// would have to take the GIL on ZeroMQ's I/O thread), sectors of a source travel zero-copy.
#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>
#include <memory>

#include "bindings.hpp"
#include "sectorflow/protocol/bad_entries.hpp"
#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/producer/errors.hpp"
#include "sectorflow/producer/from_config.hpp"
#include "sectorflow/producer/producer.hpp"
#include "sectorflow/producer/replay_source.hpp"
#include "sectorflow/producer/routing.hpp"
#include "sectorflow/producer/sector_source.hpp"
#include "sectorflow/simulator/pacer.hpp"
#include "sectorflow/simulator/simulator.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {
namespace {

using namespace sectorflow::producer;

// ~Producer may wait for queued messages (linger_ms): not while holding the GIL.
struct ReleaseGilDelete {
  void operator()(Producer* producer) const {
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      delete producer;
    } else {
      delete producer;
    }
  }
};

void bind_types(py::module_& m) {
  py::class_<ProducerOptions>(m, "ProducerOptions", "How one producer thread is wired (see producer.hpp).")
      .def_readonly("geometry", &ProducerOptions::geometry)
      .def_readonly("receiver", &ProducerOptions::receiver)
      .def_readonly("thread_id", &ProducerOptions::thread_id)
      .def_readonly("threads", &ProducerOptions::threads)
      .def_property_readonly("wire", [](const ProducerOptions& o) { return std::string(to_string(o.wire)); })
      .def_readonly("aggregator_endpoints", &ProducerOptions::aggregator_endpoints)
      .def_readwrite("aggregator_keys", &ProducerOptions::aggregator_keys,
                     "[security] with a tier: each member's public key, member order ([] : curve's server key).")
      .def_readwrite("standby_endpoints", &ProducerOptions::standby_endpoints,
                     "per member, where the standby listens for this receiver when it holds the member's lease "
                     "([aggregator] standby_host), member order; [] : no standby")
      .def_readonly("send_hwm", &ProducerOptions::send_hwm)
      .def_readonly("fallback_dir", &ProducerOptions::fallback_dir)
      .def_readonly("status_ttl_s", &ProducerOptions::status_ttl_s)
      .def_readonly("scan_record_ttl_s", &ProducerOptions::scan_record_ttl_s)
      .def_readonly("send_timeout_ms", &ProducerOptions::send_timeout_ms)
      .def_readonly("status_interval_ms", &ProducerOptions::status_interval_ms)
      .def_readonly("linger_ms", &ProducerOptions::linger_ms)
      .def_readwrite("warn", &ProducerOptions::warn,
                     "warn(line) takes the warning that a scan spills (called on the producer thread; standard "
                     "error if None).")
      .def("name", &ProducerOptions::name, "'r<receiver>t<thread_id>'.")
      .def_readwrite("curve", &ProducerOptions::curve, "[security]: CurveClient (off by default).");

  m.def("producer_options", &producer_options, py::arg("beamline"), py::arg("receiver"), py::arg("thread_id"),
        "Thread thread_id of receiver `receiver` from the beamline's keys (from_config.hpp), its CURVE keys "
        "included; raises ConfigError for a receiver or thread the file does not have.");

  m.def("aggregator_endpoints", &aggregator_endpoints, py::arg("beamline"), py::arg("receiver"),
        "Where each tier member's relay thread for `receiver` listens, member order.");
  m.def("standby_endpoints", &standby_endpoints, py::arg("beamline"), py::arg("receiver"),
        "Per tier member, where the standby listens for `receiver` while it holds that member's lease; [] without one.");

  py::enum_<Mode>(m, "Mode", "What a scan start decided.")
      .value("STREAMING", Mode::kStreaming)
      .value("FALLBACK", Mode::kFallback);

  py::class_<ScanRequest>(m, "ScanRequest", "A scan a producer thread is asked to run.")
      .def(py::init([](std::uint32_t scan_number, std::uint32_t scan_x, std::uint32_t scan_y,
                       std::optional<std::vector<std::string>> routing, std::uint32_t first_frame,
                       std::vector<std::uint32_t> tier) {
             return ScanRequest{scan_number, scan_x, scan_y, first_frame, std::move(routing), std::move(tier)};
           }),
           py::kw_only(), py::arg("scan_number"), py::arg("scan_x"), py::arg("scan_y"), py::arg("routing") = py::none(),
           py::arg("first_frame") = ScanRequest{}.first_frame, py::arg("tier") = std::vector<std::uint32_t>{},
           "routing: sorted NodeGroup UIDs ([] = fallback); None = read them from the kvstore replica. "
           "first_frame: the detector's frame counter at position 0 (position p is frame first_frame + p). "
           "tier: the aggregation tier's members that carry the scan ([] = every member).")
      .def_readonly("scan_number", &ScanRequest::scan_number)
      .def_readonly("scan_x", &ScanRequest::scan_x)
      .def_readonly("scan_y", &ScanRequest::scan_y)
      .def_readonly("first_frame", &ScanRequest::first_frame)
      .def_readonly("routing", &ScanRequest::routing)
      .def_readonly("tier", &ScanRequest::tier);

  py::class_<ScanDecision>(m, "ScanDecision", "The streaming-or-fallback decision fixed at scan start.")
      .def_readonly("scan_number", &ScanDecision::scan_number)
      .def_readonly("mode", &ScanDecision::mode)
      .def_property_readonly("mode_name", [](const ScanDecision& d) { return std::string(to_string(d.mode)); })
      .def_readonly("routing", &ScanDecision::routing)
      .def_readonly("counts", &ScanDecision::counts)
      .def_readonly("announced", &ScanDecision::announced)
      .def_readonly("file", &ScanDecision::file)
      .def_readonly("owned", &ScanDecision::owned)
      .def_readonly("lost_upstream", &ScanDecision::lost_upstream);

  py::class_<ScanResult>(m, "ScanResult", "What a scan did.")
      .def_readonly("decision", &ScanResult::decision)
      .def_readonly("messages", &ScanResult::messages)
      .def_readonly("bytes", &ScanResult::bytes)
      .def_readonly("sent", &ScanResult::sent)
      .def_readonly("spilled", &ScanResult::spilled)
      .def_readonly("spill_file", &ScanResult::spill_file)
      .def_readonly("seconds", &ScanResult::seconds);
}

void bind_sources(py::module_& m) {
  py::class_<SectorSource, std::shared_ptr<SectorSource>>(m, "SectorSource",
                                                          "One thread's sectors of one scan (made in C++).")
      .def("frames", &SectorSource::frames, py::call_guard<py::gil_scoped_release>(),
           "The probe positions the source will deliver, in order (sent as frames first_frame + position).");

  py::class_<ReplaySource, SectorSource, std::shared_ptr<ReplaySource>>(
      m, "ReplaySource",
      "Thread t of T replays the raw-file records of one sector whose position p has p % T == t; first_frame is "
      "the files' frame number - position (one per scan), the replayed ScanRequest's first_frame.")
      .def(py::init([](const std::filesystem::path& directory, std::uint32_t scan_number, std::uint32_t sector,
                       std::uint32_t scan_x, std::uint32_t scan_y, std::uint32_t threads, std::uint32_t thread_id,
                       const protocol::Geometry& geometry) {
             py::gil_scoped_release release;
             return std::make_shared<ReplaySource>(directory.string(), scan_number, sector, scan_x, scan_y, threads,
                                                   thread_id, geometry);
           }),
           py::arg("directory"), py::arg("scan_number"), py::arg("sector"), py::arg("scan_x"), py::arg("scan_y"),
           py::arg("threads"), py::arg("thread_id"), py::arg("geometry"))
      .def_property_readonly("files", &ReplaySource::files)
      .def_property_readonly("first_frame", &ReplaySource::first_frame);

  m.def("simulator_source",
        [](const simulator::Simulator& sim, std::uint32_t scan_number, std::uint32_t sector, std::uint64_t n_frames,
           std::uint32_t threads, std::uint32_t thread_id, const simulator::Pacer* pacer, std::uint32_t scan_x) {
          auto generate = [&sim, scan_number, sector, pacer, scan_x](std::uint32_t frame, void* out, std::size_t bytes) {
            if (pacer != nullptr) pacer->wait(frame);
            sim.generate_sector(scan_number, frame, sector, out, bytes, scan_x);
          };
          auto lost = [&sim, scan_number, sector](std::uint32_t frame) { return sim.dropped(scan_number, frame, sector); };
          return std::shared_ptr<SectorSource>(
              std::make_shared<GeneratedSource>(n_frames, threads, thread_id, generate, lost));
        },
        py::arg("simulator"), py::arg("scan_number"), py::arg("sector"), py::arg("n_frames"), py::arg("threads"),
        py::arg("thread_id"), py::arg("pacer") = nullptr, py::kw_only(), py::arg("scan_x") = 0,
        py::keep_alive<0, 1>(), py::keep_alive<0, 7>(),
        "Thread thread_id's share (positions p with p % threads == thread_id) of the simulated scan, minus the "
        "sectors the simulator drops; paced by `pacer` (shared by the threads of a scan, position p due at "
        "p / rate) if given. `scan_x`, the scan's width, places the frames on a specimen (required with one).");

  m.def("thread_share", &thread_share, py::arg("n_frames"), py::arg("threads"), py::arg("thread_id"),
        "Positions p of 0..n_frames-1 with p % threads == thread_id.");
  m.def("count_routes", &count_routes, py::arg("routing"), py::arg("positions"), py::arg("first_frame") = 0,
        "UID -> positions routed to it (position p is frame f = first_frame + p, routed to "
        "routing[f % len(routing)]), zeros included.");
  m.def("check_first_frame", &check_first_frame, py::arg("where"), py::arg("first_frame"), py::arg("positions"),
        "Raise ProducerError ('<where>: first frame F + N positions - 1 exceeds ...') unless every frame number "
        "first_frame + p of a scan of `positions` positions fits a uint32.");
  m.def("check_routing", &check_routing, py::arg("routing"), py::arg("scan_number"),
        "Raise ProducerError unless the list is sorted, without duplicates or empty UIDs.");
  m.def("routing_from_replica", &routing_from_replica, py::arg("client"), py::arg("bad"),
        "The sorted UIDs of the usable nodegroups/* in the client's replica; registrations that do not decode "
        "are skipped, logged once through the client's log and counted in `bad` (a kvstore.BadEntries).");
}

void bind_sibling_gate(py::module_& m) {
  py::class_<SiblingGate, std::shared_ptr<SiblingGate>>(
      m, "SiblingGate",
      "Keeps the producer threads of one receiver within max_lead_frames frames of each other during a scan "
      "(see sibling_gate.hpp): one per scan, passed to every thread's run_scan/stream.")
      .def(py::init<std::uint32_t, std::uint64_t>(), py::arg("threads"), py::arg("max_lead_frames"),
           "Raises ProducerError for no threads or a lead smaller than the thread count.")
      .def("finish", &SiblingGate::finish, py::arg("thread_id"),
           "Thread thread_id sends nothing more in this scan: nobody waits for it (idempotent).")
      .def_property_readonly("threads", &SiblingGate::threads)
      .def_property_readonly("max_lead_frames", &SiblingGate::max_lead_frames);
}

void bind_producer_class(py::module_& m) {
  py::class_<Producer, std::unique_ptr<Producer, ReleaseGilDelete>>(
      m, "Producer",
      "One producer thread: per scan, streaming (info + data messages to aggregator thread r) or fallback "
      "(raw files), decided once at scan start and published in status/producer/r<R>t<T>.")
      .def(py::init<ProducerOptions, kvstore::Client*>(), py::arg("options"), py::arg("kvstore") = nullptr,
           py::keep_alive<1, 3>(), "kvstore: a sectorflow.kvstore.Client (kept alive by the Producer) or None.")
      .def_property_readonly("options", &Producer::options)
      .def("begin_scan", &Producer::begin_scan, py::arg("request"), py::arg("positions"),
           py::call_guard<py::gil_scoped_release>(),
           "Fix routing and mode for the probe positions this thread will send, publish the status, send the "
           "info message (sectorflow wire) or create the raw file.")
      .def("send",
           [](Producer& p, std::uint32_t frame_number, std::uint32_t sector, const py::buffer& payload) {
             const py::buffer_info info = payload.request();
             const auto bytes = static_cast<std::size_t>(info.size * info.itemsize);
             py::gil_scoped_release release;
             p.send(frame_number, sector, info.ptr, bytes);
           },
           py::arg("frame_number"), py::arg("sector"), py::arg("payload"),
           "Send one announced sector of frame number frame_number (the detector's counter: the request's "
           "first_frame + position); the payload (any C-contiguous buffer) is copied. Blocks at the high-water "
           "mark with the GIL released.")
      .def("end_scan", &Producer::end_scan, py::call_guard<py::gil_scoped_release>(),
           "Close the scan and publish 'finished'; raises ProducerError if messages are missing.")
      .def("run_scan", &Producer::run_scan, py::arg("request"), py::arg("source"), py::arg("gate") = nullptr,
           py::call_guard<py::gil_scoped_release>(),
           "A whole scan from a source, GIL released throughout; with `gate`, within its lead of the sibling threads.")
      .def("stream", &Producer::stream, py::arg("source"), py::arg("positions"), py::arg("gate") = nullptr,
           py::call_guard<py::gil_scoped_release>(),
           "After begin_scan(request, positions): read and send every position, then end_scan(); GIL released. With "
           "`gate` (a SiblingGate shared by the receiver's threads), no frame runs more than its lead ahead of the "
           "slowest sibling.")
      .def("report_error", &Producer::report_error, py::arg("scan_number"), py::arg("error"), py::arg("scan_x") = 0,
           py::arg("scan_y") = 0,
           "Publish state 'error' in the status and the scan record for a scan this thread cannot run (its "
           "source failed, the request was refused); with the shape, the record says the sectors it owned.")
      .def("record", &Producer::record,
           "The scan record (sectorflow.protocol.ProducerScanRecord) last written for this thread.")
      .def("stop", &Producer::stop, "Interrupt a running or blocked scan (ProducerStopped); any thread.")
      .def_property_readonly("stopped", &Producer::stopped)
      .def("abort_scan", &Producer::abort_scan, py::arg("scan_number"),
           "Abort that scan, now or when it starts (ProducerStopped naming the abort); any thread.")
      .def_property_readonly("messages", &Producer::messages)
      .def_property_readonly("bytes", &Producer::bytes);
}

}  // namespace

void bind_producer(py::module_& m) {
  const auto& error = py::register_exception<ProducerError>(
      m, "ProducerError", py::module_::import("sectorflow.errors").attr("SectorflowError").ptr());
  py::register_exception<ProducerStopped>(m, "ProducerStopped", error);
  m.attr("STOP_CHECK_MS") = kStopCheckMs;
  bind_types(m);
  bind_sources(m);
  bind_sibling_gate(m);
  bind_producer_class(m);
}

}  // namespace sectorflow::bindings
