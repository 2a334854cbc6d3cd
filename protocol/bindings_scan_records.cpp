// Python face of the scan records (scan_records.hpp): key builders and the five records with the
// same codecs as the C++ services. Records are built by keyword, each field by its C++ name.
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <utility>

#include "bindings.hpp"
#include "sectorflow/protocol/scan_records.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {
namespace {

using namespace sectorflow::protocol;


// encode(), decode(bytes) and == for a record class.
template <typename Record>
void codec(py::class_<Record>& cls) {
  cls.def("encode", [](const Record& r) { return py::bytes(r.encode()); })
      .def_static("decode", [](const py::buffer& b) { return Record::decode(bytes_of(b)); }, py::arg("value"),
                  "Decode and validate; raises ProtocolError naming the field.")
      .def("__eq__", [](const Record& a, const Record& b) { return a == b; });
}

void bind_keys(py::module_& m) {
  m.attr("SCANS_PREFIX") = std::string(kScansPrefix);
  m.attr("SOURCE_NATIVE") = std::string(kSourceNative);
  m.attr("OUTCOME_COMPLETE") = std::string(kOutcomeComplete);
  m.attr("OUTCOME_INCOMPLETE") = std::string(kOutcomeIncomplete);
  m.attr("OUTCOME_FAILED") = std::string(kOutcomeFailed);
  m.attr("OUTCOME_ABORTED") = std::string(kOutcomeAborted);
  m.def("scan_prefix", &scan_prefix, py::arg("scan"), "'scans/<scan:010d>/': the subtree of one scan's record.");
  m.def("parse_scan_key", [](const std::string& key) { return parse_scan_key(key); }, py::arg("key"),
        "The scan number of a key under scans/.");
  m.def("scan_request_key", &scan_request_key, py::arg("scan"));
  m.def("scan_producer_key", &scan_producer_key, py::arg("scan"), py::arg("receiver"), py::arg("thread"));
  m.def("scan_relay_key", &scan_relay_key, py::arg("scan"), py::arg("thread"));
  m.def("scan_nodegroup_key", [](std::uint32_t scan, const std::string& uid) { return scan_nodegroup_key(scan, uid); },
        py::arg("scan"), py::arg("uid"));
  m.def("scan_file_key", &scan_file_key, py::arg("scan"));
}

void bind_request_record(py::module_& m) {
  py::class_<ScanRequestRecord> cls(m, "ScanRequestRecord", "scans/<n>/request: what `sectorflow acquire` asked for.");
  cls.def(py::init([](std::uint32_t scan_number, std::uint32_t scan_x, std::uint32_t scan_y, std::string source,
                      std::vector<std::string> routing, std::vector<std::uint32_t> producer_threads,
                      double requested_s) {
            return ScanRequestRecord{scan_number, scan_x, scan_y, std::move(source), std::move(routing),
                                     std::move(producer_threads), requested_s, {}};
          }),
          py::kw_only(), py::arg("scan_number"), py::arg("scan_x"), py::arg("scan_y"), py::arg("source"),
          py::arg("routing"), py::arg("producer_threads"), py::arg("requested_s"))
      .def_readwrite("scan_number", &ScanRequestRecord::scan_number)
      .def_readwrite("scan_x", &ScanRequestRecord::scan_x)
      .def_readwrite("scan_y", &ScanRequestRecord::scan_y)
      .def_readwrite("source", &ScanRequestRecord::source)
      .def_readwrite("routing", &ScanRequestRecord::routing)
      .def_readwrite("producer_threads", &ScanRequestRecord::producer_threads)
      .def_readwrite("requested_s", &ScanRequestRecord::requested_s)
      .def_readwrite("tier", &ScanRequestRecord::tier,
                     "The aggregation tier's members that carry the scan, ascending; [] : one aggregator.")
      .def("carried_by", &ScanRequestRecord::carried_by, py::arg("member"),
           "Whether member `member` of the aggregation tier carries the scan.")
      .def_property_readonly("sectors", &ScanRequestRecord::sectors, "Every position's sector of every receiver.");
  codec(cls);
}

void bind_producer_record(py::module_& m) {
  py::class_<ProducerScanRecord> cls(m, "ProducerScanRecord",
                                     "scans/<n>/producer/r<R>t<T>: one producer thread's account of its sectors.");
  cls.def(py::init([](std::uint32_t receiver, std::uint32_t thread, std::string state, std::vector<std::string> routing,
                      std::map<std::string, std::uint64_t> counts, std::uint64_t owned, std::uint64_t lost_upstream,
                      std::uint64_t sent, std::uint64_t spilled, std::string spill_file, bool partial,
                      std::string error, double updated_s) {
            return ProducerScanRecord{receiver, thread, std::move(state), std::move(routing), std::move(counts),
                                      owned, lost_upstream, sent, spilled, std::move(spill_file), partial,
                                      std::move(error), updated_s, {}, {}};
          }),
          py::kw_only(), py::arg("receiver"), py::arg("thread"), py::arg("state"), py::arg("routing"),
          py::arg("counts"), py::arg("owned"), py::arg("lost_upstream"), py::arg("sent"), py::arg("spilled"),
          py::arg("spill_file"), py::arg("partial"), py::arg("error"), py::arg("updated_s"))
      .def_readwrite("receiver", &ProducerScanRecord::receiver)
      .def_readwrite("thread", &ProducerScanRecord::thread)
      .def_readwrite("state", &ProducerScanRecord::state)
      .def_readwrite("routing", &ProducerScanRecord::routing)
      .def_readwrite("counts", &ProducerScanRecord::counts)
      .def_readwrite("owned", &ProducerScanRecord::owned)
      .def_readwrite("lost_upstream", &ProducerScanRecord::lost_upstream)
      .def_readwrite("sent", &ProducerScanRecord::sent)
      .def_readwrite("spilled", &ProducerScanRecord::spilled)
      .def_readwrite("spill_file", &ProducerScanRecord::spill_file)
      .def_readwrite("partial", &ProducerScanRecord::partial)
      .def_readwrite("error", &ProducerScanRecord::error)
      .def_readwrite("updated_s", &ProducerScanRecord::updated_s)
      .def_readwrite("tier_counts", &ProducerScanRecord::tier_counts,
                     "Per tier member m and routing index g, at m * len(routing) + g; empty: one aggregator.")
      .def_readwrite("tier_sent", &ProducerScanRecord::tier_sent,
                     "Of sent, what went to each tier member; empty: one aggregator.")
      .def("sent_to", &ProducerScanRecord::sent_to, py::arg("member"),
           "What the thread sent to tier member `member` (sent with no tier).")
      .def("counts_for", &ProducerScanRecord::counts_for, py::arg("member"),
           "What the info message to tier member `member` announced; None if the record has no such member.")
      .def_property_readonly("unaccounted", &ProducerScanRecord::unaccounted,
                             "Sectors neither lost upstream, sent nor spilled.");
  codec(cls);
}

void bind_relay_record(py::module_& m) {
  py::class_<RelayScanRecord> cls(m, "RelayScanRecord", "scans/<n>/aggregator/t<r>: one relay thread's account.");
  cls.def(py::init([](std::uint32_t thread, bool complete, std::map<std::string, std::uint64_t> forwarded,
                      std::map<std::string, std::uint64_t> lost, std::vector<std::string> dead, double updated_s,
                      std::uint32_t run) {
            return RelayScanRecord{thread,   complete, std::move(forwarded), std::move(lost), std::move(dead),
                                   updated_s, run};
          }),
          py::kw_only(), py::arg("thread"), py::arg("complete"), py::arg("forwarded"), py::arg("lost"),
          py::arg("dead"), py::arg("updated_s"), py::arg("run") = 0)
      .def_readwrite("thread", &RelayScanRecord::thread)
      .def_readwrite("complete", &RelayScanRecord::complete)
      .def_readwrite("forwarded", &RelayScanRecord::forwarded)
      .def_readwrite("lost", &RelayScanRecord::lost)
      .def_readwrite("dead", &RelayScanRecord::dead)
      .def_readwrite("updated_s", &RelayScanRecord::updated_s)
      .def_readwrite("run", &RelayScanRecord::run);
  codec(cls);
}

void bind_nodegroup_record(py::module_& m) {
  py::class_<PortRun>(m, "PortRun", "One run of a scan heard on one port of a NodeGroup.")
      .def(py::init([](std::uint32_t port, std::uint32_t run, std::int64_t expected, std::uint64_t received) {
             return PortRun{port, run, expected, received};
           }),
           py::kw_only(), py::arg("port"), py::arg("run"), py::arg("expected"), py::arg("received"))
      .def_readwrite("port", &PortRun::port)
      .def_readwrite("run", &PortRun::run, "the relay thread's run; 0: a sender that names none")
      .def_readwrite("expected", &PortRun::expected, "-1: no info of this run came")
      .def_readwrite("received", &PortRun::received)
      .def(py::self == py::self)
      .def("__repr__", [](const PortRun& r) {
        return "PortRun(port=" + std::to_string(r.port) + ", run=" + std::to_string(r.run) +
               ", expected=" + std::to_string(r.expected) + ", received=" + std::to_string(r.received) + ")";
      });
  py::class_<NodeGroupScanRecord> cls(m, "NodeGroupScanRecord",
                                      "scans/<n>/nodegroup/<uid>: one NodeGroup's account of its part.");
  cls.def(py::init([](std::string uid, std::vector<std::int64_t> expected, std::vector<std::uint64_t> received,
                      std::uint64_t frames_complete, std::uint64_t frames_incomplete, std::uint64_t sectors_counted,
                      std::uint64_t late, std::uint64_t duplicates, bool timed_out, double updated_s,
                      std::vector<PortRun> runs) {
            return NodeGroupScanRecord{std::move(uid), std::move(expected), std::move(received), frames_complete,
                                       frames_incomplete, sectors_counted, late, duplicates, timed_out, updated_s,
                                       std::move(runs)};
          }),
          py::kw_only(), py::arg("uid"), py::arg("expected"), py::arg("received"), py::arg("frames_complete"),
          py::arg("frames_incomplete"), py::arg("sectors_counted"), py::arg("late"), py::arg("duplicates"),
          py::arg("timed_out"), py::arg("updated_s"), py::arg("runs") = std::vector<PortRun>{})
      .def_readwrite("uid", &NodeGroupScanRecord::uid)
      .def_readwrite("expected", &NodeGroupScanRecord::expected)
      .def_readwrite("received", &NodeGroupScanRecord::received)
      .def_readwrite("frames_complete", &NodeGroupScanRecord::frames_complete)
      .def_readwrite("frames_incomplete", &NodeGroupScanRecord::frames_incomplete)
      .def_readwrite("sectors_counted", &NodeGroupScanRecord::sectors_counted)
      .def_readwrite("late", &NodeGroupScanRecord::late)
      .def_readwrite("duplicates", &NodeGroupScanRecord::duplicates)
      .def_readwrite("timed_out", &NodeGroupScanRecord::timed_out)
      .def_readwrite("updated_s", &NodeGroupScanRecord::updated_s)
      .def_readwrite("runs", &NodeGroupScanRecord::runs,
                     "every run heard per port when some port heard more than one; [] otherwise");
  codec(cls);
}

void bind_file_record(py::module_& m) {
  py::class_<ScanFileRecord> cls(m, "ScanFileRecord", "scans/<n>/file: the scan's counted file, or why there is none.");
  cls.def(py::init([](std::string outcome, std::string path, std::vector<std::string> extra_paths,
                      std::uint64_t positions, std::uint64_t frames_written, std::uint64_t positions_missing,
                      std::vector<std::uint64_t> sectors_counted, std::string reason, double written_s) {
            return ScanFileRecord{std::move(outcome), std::move(path), std::move(extra_paths), positions,
                                  frames_written, positions_missing, std::move(sectors_counted), std::move(reason),
                                  written_s};
          }),
          py::kw_only(), py::arg("outcome"), py::arg("path"), py::arg("extra_paths"), py::arg("positions"),
          py::arg("frames_written"), py::arg("positions_missing"), py::arg("sectors_counted"), py::arg("reason"),
          py::arg("written_s"))
      .def_readwrite("outcome", &ScanFileRecord::outcome)
      .def_readwrite("path", &ScanFileRecord::path)
      .def_readwrite("extra_paths", &ScanFileRecord::extra_paths)
      .def_readwrite("positions", &ScanFileRecord::positions)
      .def_readwrite("frames_written", &ScanFileRecord::frames_written)
      .def_readwrite("positions_missing", &ScanFileRecord::positions_missing)
      .def_readwrite("sectors_counted", &ScanFileRecord::sectors_counted)
      .def_readwrite("reason", &ScanFileRecord::reason)
      .def_readwrite("written_s", &ScanFileRecord::written_s)
      .def_property_readonly("total_counted", &ScanFileRecord::total_counted, "Sectors counted in the file.");
  codec(cls);
}

}  // namespace

void bind_scan_records(py::module_& m) {
  bind_keys(m);
  bind_request_record(m);
  bind_producer_record(m);
  bind_relay_record(m);
  bind_nodegroup_record(m);
  bind_file_record(m);
}

}  // namespace sectorflow::bindings
