// Python face of the aggregator: options, counters, scan summaries and the Aggregator itself.
// Construction, start and stop release the GIL (they bind, spawn and join threads); the relay
// threads never touch Python.
#include <pybind11/stl.h>

#include <chrono>
#include <utility>

#include "bindings.hpp"
#include "sectorflow/aggregator/aggregator.hpp"
#include "sectorflow/aggregator/errors.hpp"
#include "sectorflow/aggregator/from_config.hpp"
#include "sectorflow/protocol/refusal.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {
namespace {

using namespace sectorflow::aggregator;

// The relay threads and the replica's agent are joined without the GIL: the agent may be waiting
// for it to run a Python log callback.
struct ReleaseGilDelete {
  void operator()(Aggregator* aggregator) const {
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      delete aggregator;
    } else {
      delete aggregator;
    }
  }
};

py::dict malformed_dict(const RelayStats& stats) {
  py::dict out;
  for (std::size_t i = 0; i < protocol::kRefusalKinds; ++i) {
    out[protocol::to_string(static_cast<protocol::Refusal>(i))] = stats.malformed.counts[i];
  }
  return out;
}

py::dict first_malformed_dict(const RelayStats& stats) {
  py::dict out;
  for (std::size_t i = 0; i < protocol::kRefusalKinds; ++i) {
    if (!stats.malformed.first[i].empty()) {
      out[protocol::to_string(static_cast<protocol::Refusal>(i))] = stats.malformed.first[i];
    }
  }
  return out;
}

}  // namespace

void bind_aggregator(py::module_& m) {
  py::register_exception<AggregatorError>(m, "AggregatorError",
                                          py::module_::import("sectorflow.errors").attr("SectorflowError").ptr());

  py::class_<AggregatorOptions>(m, "AggregatorOptions", "Where the relay threads listen and how they find NodeGroups.")
      .def(py::init<>(), "Every field unset: fill it with aggregator_options.")
      .def_readwrite("bind_host", &AggregatorOptions::bind_host)
      .def_readwrite("base_port", &AggregatorOptions::base_port)
      .def_readwrite("member", &AggregatorOptions::member, "This aggregator's index in the tier ([aggregator] tier).")
      .def_readwrite("members", &AggregatorOptions::members, "The tier's size.")
      .def_readwrite("producer_threads", &AggregatorOptions::producer_threads)
      .def_readwrite("hwm", &AggregatorOptions::hwm)
      .def_readwrite("sndbuf_bytes", &AggregatorOptions::sndbuf_bytes)
      .def_readwrite("discovery_wait_ms", &AggregatorOptions::discovery_wait_ms)
      .def_readwrite("max_open_scans", &AggregatorOptions::max_open_scans)
      .def_readwrite("send_timeout_ms", &AggregatorOptions::send_timeout_ms)
      .def_readwrite("scan_record_ttl_s", &AggregatorOptions::scan_record_ttl_s)
      .def_readwrite("wire", &AggregatorOptions::wire)
      .def_readwrite("native_scan_idle_s", &AggregatorOptions::native_scan_idle_s)
      .def_readwrite("native_scans_requested", &AggregatorOptions::native_scans_requested,
                     "[aggregator] native_scans_requested: native data of a scan with no request record is refused.")
      .def_readwrite("kvstore", &AggregatorOptions::kvstore, "The ClientOptions of the replicas (the subtree is forced).")
      .def_readwrite("geometry", &AggregatorOptions::geometry)
      .def_readwrite("max_scan_positions", &AggregatorOptions::max_scan_positions)
      .def_readwrite("producers_curve", &AggregatorOptions::producers_curve, "[security]: CurveServer of the PULL sockets.")
      .def_readwrite("nodegroups_curve", &AggregatorOptions::nodegroups_curve,
                     "[security]: CurveServer of the sockets to the NodeGroups.");

  m.def("aggregator_options", &aggregator_options, py::arg("beamline"), py::arg("member") = 0,
        "Tier member `member`'s options from the beamline's keys (from_config.hpp), all but kvstore and the "
        "CURVE servers; raises ConfigError for a member the tier does not have.");

  py::class_<RelayStats>(m, "RelayStats", "A snapshot of one relay thread's counters.")
      .def_readonly("thread", &RelayStats::thread)
      .def_readonly("streaming", &RelayStats::streaming)
      .def_readonly("scan", &RelayStats::scan)
      .def_readonly("messages", &RelayStats::messages)
      .def_readonly("bytes", &RelayStats::bytes)
      .def_readonly("infos", &RelayStats::infos)
      .def_readonly("lost", &RelayStats::lost)
      .def_readonly("dead", &RelayStats::dead)
      .def_readonly("recovered_scans", &RelayStats::recovered_scans)
      .def_readonly("native_scans", &RelayStats::native_scans)
      .def_readonly("open_scans", &RelayStats::open_scans)
      .def_readonly("evicted_scans", &RelayStats::evicted_scans)
      .def_property_readonly("malformed", &malformed_dict, "kind -> messages refused (protocol.REFUSAL_KINDS)")
      .def_property_readonly("first_malformed", &first_malformed_dict,
                             "kind -> what was wrong with the first one (kinds that occurred)");

  py::class_<ScanSummary>(m, "ScanSummary", "One scan as one relay thread saw it.")
      .def_readonly("thread", &ScanSummary::thread)
      .def_readonly("scan", &ScanSummary::scan)
      .def_readonly("closed", &ScanSummary::closed)
      .def_readonly("complete", &ScanSummary::complete)
      .def_readonly("recovered", &ScanSummary::recovered)
      .def_readonly("expected", &ScanSummary::expected)
      .def_readonly("forwarded", &ScanSummary::forwarded)
      .def_readonly("bytes", &ScanSummary::bytes)
      .def_readonly("lost", &ScanSummary::lost)
      .def_readonly("seconds", &ScanSummary::seconds)
      .def_readonly("counts", &ScanSummary::counts)
      .def_readonly("lost_by_uid", &ScanSummary::lost_by_uid)
      .def_readonly("dead", &ScanSummary::dead)
      .def_readonly("note", &ScanSummary::note);

  py::class_<Aggregator, std::unique_ptr<Aggregator, ReleaseGilDelete>>(
      m, "Aggregator", "One relay thread per receiver; binds every PULL socket when constructed.")
      .def(py::init<AggregatorOptions>(), py::arg("options"), py::call_guard<py::gil_scoped_release>())
      .def(
          "wait_synced",
          [](const Aggregator& a, double timeout_s) {
            return a.wait_synced(std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000)));
          },
          py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>(),
          "Wait at most timeout_s for both kvstore replicas (nodegroups/, scans/); True once they are live.")
      .def("start", &Aggregator::start, py::call_guard<py::gil_scoped_release>())
      .def("stop", &Aggregator::stop, py::call_guard<py::gil_scoped_release>(),
           "Stop and join the relay threads, close every socket; idempotent.")
      .def("threads", &Aggregator::threads)
      .def_property_readonly("member", [](const Aggregator& a) { return a.options().member; },
                             "This aggregator's index in the tier: its thread r is relay thread member * threads + r.")
      .def("endpoint", &Aggregator::endpoint, py::arg("thread"))
      .def("stats", &Aggregator::stats, py::arg("thread"))
      .def("take_summaries", &Aggregator::take_summaries, "The scans that ended since the last call, and interim reports (closed False) of NodeGroups declared dead and scans rebuilt from records.")
      .def("bad_records", &Aggregator::bad_records,
           "NodeGroup registrations that did not decode, reported so far (their NodeGroups count as absent).")
      .def("failure", &Aggregator::failure, "The first relay thread failure, '' if none.")
      .def("zap_stats", &Aggregator::zap_stats, "Peers accepted and refused at the CURVE handshake.")
      .def("take_security_refusals", &Aggregator::take_security_refusals,
           "One line per peer key refused for the first time since the last call.");
}

}  // namespace sectorflow::bindings
