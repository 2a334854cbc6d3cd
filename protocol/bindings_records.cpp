// Python face of the kvstore records: the same key builders, records and codecs as the C++ services.
#include <pybind11/stl.h>

#include <cctype>

#include "bindings.hpp"
#include "sectorflow/protocol/bad_entries.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/protocol/service_state.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {
namespace {

using namespace sectorflow::protocol;


std::string ports_text(const std::vector<std::uint16_t>& ports) {
  std::string text;
  for (const std::uint16_t port : ports) text += (text.empty() ? "" : ", ") + std::to_string(port);
  return "[" + text + "]";
}

void bind_constants(py::module_& m) {
  m.attr("SCHEMA_VERSION") = kSchemaVersion;
  m.attr("NODEGROUPS_PREFIX") = std::string(kNodegroupsPrefix);
  m.attr("STATUS_PREFIX") = std::string(kStatusPrefix);
  m.attr("ACQUIRE_PREFIX") = std::string(kAcquirePrefix);
  m.attr("ACQUIRE_REQUEST_KEY") = std::string(kAcquireRequestKey);
  m.attr("SERVICE_PRODUCER") = std::string(kServiceProducer);
  m.attr("SERVICE_AGGREGATOR") = std::string(kServiceAggregator);
  m.attr("SERVICE_NODEGROUP") = std::string(kServiceNodegroup);
  m.attr("SERVICE_KVSTORE") = std::string(kServiceKvstore);
  // The service states, each as STATE_<NAME> ("writing-to-disk" as STATE_WRITING_TO_DISK), in order.
  py::list states;
  for (std::size_t i = 0; i < kServiceStates; ++i) {
    const std::string name(to_string(static_cast<ServiceState>(i)));
    states.append(name);
    std::string attr = "STATE_";
    for (const char c : name) attr += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    m.attr(attr.c_str()) = name;
  }
  m.attr("SERVICE_STATES") = py::tuple(states);
  m.def("transition_allowed",
        [](const std::string& from, const std::string& to) {
          const auto state = [](const std::string& name) {
            const std::optional<ServiceState> parsed = parse_service_state(name);
            if (!parsed) throw ProtocolError("'" + name + "' is not a service state");
            return *parsed;
          };
          return transition_allowed(state(from), state(to));
        },
        py::arg("from_state"), py::arg("to_state"),
        "Whether a service may go from one state to another (protocol/service_state.hpp).");
  m.attr("SOURCE_SIMULATOR") = std::string(kSourceSimulator);
  m.attr("SOURCE_REPLAY") = std::string(kSourceReplay);
  m.attr("MAX_UID_BYTES") = kMaxUidBytes;
  m.attr("MAX_NAME_BYTES") = kMaxNameBytes;
  m.attr("MAX_TEXT_BYTES") = kMaxTextBytes;
  m.attr("MAX_PORTS") = kMaxPorts;
  m.attr("MAX_EXTRA_FIELDS") = kMaxExtraFields;

  m.def("nodegroup_key", [](const std::string& uid) { return nodegroup_key(uid); }, py::arg("uid"),
        "'nodegroups/<uid>'.");
  m.def("status_key", [](const std::string& s, const std::string& n) { return status_key(s, n); },
        py::arg("service"), py::arg("name"), "'status/<service>/<name>'.");
  m.def("status_prefix", [](const std::string& s) { return status_prefix(s); }, py::arg("service") = "",
        "'status/<service>/', or 'status/' for every service.");
  m.def("parse_status_key", [](const std::string& key) { return parse_status_key(key); }, py::arg("key"),
        "(service, name) of a status key.");
  m.def("parse_nodegroup_key", [](const std::string& key) { return parse_nodegroup_key(key); }, py::arg("key"),
        "The uid of a nodegroups/ key.");
  m.def("wall_clock_s", &wall_clock_s, "Seconds since the Unix epoch (the clock of ServiceStatus.updated_s).");
}

void bind_records(py::module_& m) {
  const NodeGroupRecord ng;
  py::class_<NodeGroupRecord>(m, "NodeGroupRecord", "nodegroups/<uid>: where a NodeGroup receives data.")
      .def(py::init([](std::string uid, std::string host, std::vector<std::uint16_t> ports, std::string node,
                       std::uint32_t rank, std::string status, std::string stack_id) {
             return NodeGroupRecord{std::move(uid), std::move(host), std::move(ports), std::move(node), rank,
                                    std::move(status), std::move(stack_id)};
           }),
           py::kw_only(), py::arg("uid"), py::arg("host"), py::arg("ports"), py::arg("node") = ng.node,
           py::arg("rank") = ng.rank, py::arg("status") = ng.status, py::arg("stack_id") = ng.stack_id)
      .def_readwrite("uid", &NodeGroupRecord::uid)
      .def_readwrite("host", &NodeGroupRecord::host)
      .def_readwrite("ports", &NodeGroupRecord::ports)
      .def_readwrite("node", &NodeGroupRecord::node)
      .def_readwrite("rank", &NodeGroupRecord::rank)
      .def_readwrite("status", &NodeGroupRecord::status)
      .def_readwrite("stack_id", &NodeGroupRecord::stack_id,
                     "The stack it registered in (16 hex digits), or '' if its writer had not synced.")
      .def("endpoint", &NodeGroupRecord::endpoint, py::arg("thread"), "'tcp://host:ports[thread]'.")
      .def("encode", [](const NodeGroupRecord& r) { return py::bytes(r.encode()); })
      .def_static("decode", [](const py::buffer& b) { return NodeGroupRecord::decode(bytes_of(b)); }, py::arg("value"),
                  "Decode and validate; raises ProtocolError naming the field.")
      .def("__eq__", [](const NodeGroupRecord& a, const NodeGroupRecord& b) { return a == b; })
      .def("__repr__", [](const NodeGroupRecord& r) {
        return "NodeGroupRecord(uid='" + r.uid + "', host='" + r.host + "', ports=" + ports_text(r.ports) +
               ", node='" + r.node + "', rank=" + std::to_string(r.rank) + ", status='" + r.status + "'" +
               (r.stack_id.empty() ? std::string() : ", stack_id='" + r.stack_id + "'") + ")";
      });

  py::class_<NodeGroupList>(m, "NodeGroupList", "What nodegroups_from made of a nodegroups/ subtree.")
      .def_readonly("records", &NodeGroupList::records, "The usable NodeGroupRecords, sorted by uid.")
      .def_readonly("rejected", &NodeGroupList::rejected, "key -> why it was skipped.")
      .def("__repr__", [](const NodeGroupList& list) {
        return "NodeGroupList(" + std::to_string(list.records.size()) + " records, " +
               std::to_string(list.rejected.size()) + " rejected)";
      });

  m.def("nodegroups_from", [](const py::dict& entries) {
        std::map<std::string, std::string> values;
        for (const auto& [key, value] : entries) {
          values[key.cast<std::string>()] = bytes_of(py::reinterpret_borrow<py::buffer>(value));
        }
        return nodegroups_from(values);
      },
      py::arg("entries"),
      "The NodeGroups of a nodegroups/ subtree {key: value bytes}: .records sorted by uid, and .rejected "
      "{key: why} for the entries that do not decode (skipped, never raised).");

  py::class_<BadEntries>(m, "BadEntries", "Which skipped entries a reader already reported (log each once).")
      .def(py::init<>())
      .def("note", &BadEntries::note, py::arg("prefix"), py::arg("rejected"),
           "The entries of rejected {key: why} not reported yet (to log now); forgets keys under prefix that "
           "are no longer rejected.")
      .def_property_readonly("count", &BadEntries::count, "Bad entries reported so far: the bad_records counter.");

  const ServiceStatus st;
  py::class_<ServiceStatus>(m, "ServiceStatus", "status/<service>/<name>: what a service is doing.")
      .def(py::init([](std::string state, std::uint32_t scan, std::uint64_t messages, std::uint64_t bytes,
                       double updated_s, std::map<std::string, StatusValue> extra) {
             return ServiceStatus{std::move(state), scan, messages, bytes, updated_s, std::move(extra)};
           }),
           py::kw_only(), py::arg("state"), py::arg("scan") = st.scan, py::arg("messages") = st.messages,
           py::arg("bytes") = st.bytes, py::arg("updated_s") = st.updated_s, py::arg("extra") = st.extra,
           "updated_s 0 is stamped with the current time by encode().")
      .def_readwrite("state", &ServiceStatus::state)
      .def_readwrite("scan", &ServiceStatus::scan)
      .def_readwrite("messages", &ServiceStatus::messages)
      .def_readwrite("bytes", &ServiceStatus::bytes)
      .def_readwrite("updated_s", &ServiceStatus::updated_s)
      .def_readwrite("extra", &ServiceStatus::extra,
                     "Free fields (bool, int, float, str); assign a new dict to change.")
      .def("encode", [](const ServiceStatus& s) { return py::bytes(s.encode()); })
      .def_static("decode", [](const py::buffer& b) { return ServiceStatus::decode(bytes_of(b)); }, py::arg("value"))
      .def("__eq__", [](const ServiceStatus& a, const ServiceStatus& b) { return a == b; })
      .def("__repr__", [](const ServiceStatus& s) {
        return "ServiceStatus(state='" + s.state + "', scan=" + std::to_string(s.scan) + ", messages=" +
               std::to_string(s.messages) + ", bytes=" + std::to_string(s.bytes) + ", " +
               std::to_string(s.extra.size()) + " extra)";
      });

  const AcquireRequest ar;
  py::class_<AcquireRequest>(m, "AcquireRequest", "acquire/request: the scan the producers are asked to run.")
      .def(py::init([](std::uint32_t scan_number, std::uint32_t scan_x, std::uint32_t scan_y, double rate_hz,
                       std::optional<std::vector<std::string>> routing, std::string source) {
             return AcquireRequest{scan_number, scan_x, scan_y, rate_hz, std::move(routing), std::move(source), {}};
           }),
           py::kw_only(), py::arg("scan_number"), py::arg("scan_x"), py::arg("scan_y"), py::arg("rate_hz") = ar.rate_hz,
           py::arg("routing") = ar.routing, py::arg("source") = ar.source,
           "routing: sorted NodeGroup UIDs ([] = fallback, None = each producer reads its replica); "
           "source: 'simulator' or 'replay'.")
      .def_readwrite("scan_number", &AcquireRequest::scan_number)
      .def_readwrite("scan_x", &AcquireRequest::scan_x)
      .def_readwrite("scan_y", &AcquireRequest::scan_y)
      .def_readwrite("rate_hz", &AcquireRequest::rate_hz)
      .def_readwrite("routing", &AcquireRequest::routing)
      .def_readwrite("source", &AcquireRequest::source)
      .def_readwrite("tier", &AcquireRequest::tier,
                     "The aggregation tier's members that carry the scan, ascending; [] : every member configured.")
      .def("encode", [](const AcquireRequest& r) { return py::bytes(r.encode()); })
      .def_static("decode", [](const py::buffer& b) { return AcquireRequest::decode(bytes_of(b)); }, py::arg("value"))
      .def("__eq__", [](const AcquireRequest& a, const AcquireRequest& b) { return a == b; })
      .def("__repr__", [](const AcquireRequest& r) {
        return "AcquireRequest(scan_number=" + std::to_string(r.scan_number) + ", scan " + std::to_string(r.scan_x) +
               " x " + std::to_string(r.scan_y) + ", rate_hz=" + std::to_string(r.rate_hz) + ", routing=" +
               (r.routing ? std::to_string(r.routing->size()) + " uids" : std::string("replica")) + ", source='" +
               r.source + "')";
      });
}

}  // namespace

void bind_kvstore_records(py::module_& m) {
  bind_constants(m);
  bind_records(m);
}

}  // namespace sectorflow::bindings
