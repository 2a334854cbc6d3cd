// Python face of the kvstore: the kvmsg codec, the server and the client, the same C++ code the
// C++ services link. Blocking calls release the GIL; callbacks from the agent thread take it.
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <utility>

#include "bindings.hpp"
#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/from_config.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"
#include "sectorflow/kvstore/pair_state.hpp"
#include "sectorflow/kvstore/server.hpp"
#include "sectorflow/kvstore/stack_id.hpp"
#include "sectorflow/protocol/service_state.hpp"

namespace py = pybind11;

namespace sectorflow::bindings {


namespace {

using namespace sectorflow::kvstore;

bool interpreter_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

// A Python callable that C++ threads call and drop: called with the GIL, released with the GIL,
// skipped once the interpreter is shutting down (a thread must not take the GIL then).
class PyCallable {
 public:
  explicit PyCallable(py::function function)
      : function_(new py::function(std::move(function)), [](py::function* f) {
          if (!interpreter_alive()) return;  // leaked: nobody is left to free it
          py::gil_scoped_acquire gil;
          delete f;
        }) {}

  /// Runs `call(function)` holding the GIL; build the Python arguments inside `call`.
  template <class Call>
  void invoke(Call&& call) const {
    if (!interpreter_alive()) return;
    py::gil_scoped_acquire gil;
    try {
      call(*function_);
    } catch (py::error_already_set& error) {
      error.discard_as_unraisable(*function_);  // reported through sys.unraisablehook
    }
  }

 private:
  std::shared_ptr<py::function> function_;
};

// pybind11 destroys a Client holding the GIL; its agent may be waiting for the GIL to run a
// callback, so the join in ~Client must run without it.
struct ReleaseGilDelete {
  void operator()(Client* client) const {
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      delete client;
    } else {
      delete client;
    }
  }
};


py::object optional_bytes(const std::optional<std::string>& value) {
  return value ? py::object(py::bytes(*value)) : py::object(py::none());
}

py::dict bytes_dict(const std::map<std::string, std::string>& entries) {
  py::dict out;
  for (const auto& [key, value] : entries) out[py::str(key)] = py::bytes(value);
  return out;
}

void bind_pair_table(py::module_& m) {
  m.def(
      "pair_table",
      [] {
        py::list rows;
        for (std::size_t state = 0; state < kPairStates; ++state) {
          for (std::size_t event = 0; event < kPairEvents; ++event) {
            const PairStep& step = kPairTable[state][event];
            rows.append(py::make_tuple(std::string(name(static_cast<PairState>(state))),
                                       std::string(name(static_cast<PairEvent>(event))),
                                       std::string(name(step.primary)), std::string(name(step.backup)), step.serve,
                                       std::string(step.why)));
          }
        }
        return rows;
      },
      "The kvstore pair's state machine (pair_state.hpp) as (state, event, primary's next, backup's next, "
      "serve, why) rows: kvstore/SPEC.md prints it.");
}

void bind_stack_id(py::module_& m) {
  m.attr("STACK_ID_FIELD") = std::string(kStackIdField);
  m.attr("STACK_CHANGED_FIELD") = std::string(kStackChangedField);
  m.attr("SERVER_FIELD") = std::string(kServerField);
  m.attr("STACK_ID_FILE") = std::string(kStackIdFile);
  m.def("new_stack_id", &new_stack_id, "A new random stack id (16 hex digits).");
  m.def("is_stack_id", [](const std::string& text) { return is_stack_id(text); }, py::arg("text"));
}

void bind_kvmsg(py::module_& m) {
  m.attr("KVMSG_FRAMES") = kKvmsgFrames;
  m.attr("SEQUENCE_BYTES") = kSequenceBytes;
  m.attr("UUID_BYTES") = kUuidBytes;
  m.attr("MAX_KEY_BYTES") = kMaxKeyBytes;
  m.attr("MAX_PROPERTIES_BYTES") = kMaxPropertiesBytes;
  m.attr("TTL_CEILING_S") = kTtlCeilingS;
  m.attr("SNAPSHOT_REQUEST") = std::string(kSnapshotRequest);
  m.attr("SNAPSHOT_END") = std::string(kSnapshotEnd);
  m.attr("HEARTBEAT") = std::string(kHeartbeat);
  m.attr("TTL_PROPERTY") = std::string(kTtlProperty);

  py::class_<KvMsg>(m, "KvMsg", "One Clone-pattern message: key, sequence, uuid, properties, body.")
      .def(py::init([](std::string key, std::int64_t sequence, const py::bytes& uuid, Properties properties,
                       const py::bytes& body) {
             return KvMsg{std::move(key), sequence, std::string(uuid), std::move(properties), std::string(body)};
           }),
           py::kw_only(), py::arg("key"), py::arg("sequence") = 0, py::arg("uuid") = py::bytes(),
           py::arg("properties") = Properties{}, py::arg("body") = py::bytes())
      .def_readwrite("key", &KvMsg::key)
      .def_readwrite("sequence", &KvMsg::sequence)
      .def_property(
          "uuid", [](const KvMsg& msg) { return py::bytes(msg.uuid); },
          [](KvMsg& msg, const py::bytes& uuid) { msg.uuid = std::string(uuid); })
      .def_readwrite("properties", &KvMsg::properties)
      .def_property(
          "body", [](const KvMsg& msg) { return py::bytes(msg.body); },
          [](KvMsg& msg, const py::bytes& body) { msg.body = std::string(body); })
      .def_property("ttl_s", &KvMsg::ttl_s, &KvMsg::set_ttl_s, "The ttl property in seconds (0: none).")
      .def("is_delete", &KvMsg::is_delete)
      .def("__eq__", [](const KvMsg& a, const KvMsg& b) { return a == b; })
      .def("__repr__", [](const KvMsg& msg) {
        return "KvMsg(key='" + msg.key + "', sequence=" + std::to_string(msg.sequence) + ", " +
               std::to_string(msg.body.size()) + " body bytes)";
      });

  m.def("encode_kvmsg", [](const KvMsg& msg) {
        py::list frames;
        for (const std::string& frame : encode_kvmsg(msg)) frames.append(py::bytes(frame));
        return frames;
      },
      py::arg("msg"), "The five frames of a kvmsg, as bytes.");
  m.def("decode_kvmsg", [](const py::sequence& frames) {
        std::vector<std::string> owned;
        for (const py::handle frame : frames) owned.push_back(bytes_of(py::reinterpret_borrow<py::buffer>(frame)));
        return decode_kvmsg(std::vector<std::string_view>(owned.begin(), owned.end()));
      },
      py::arg("frames"), "Decode and validate the frames of a kvmsg; raises KvstoreError saying what is wrong.");
  m.def("encode_sequence", [](std::int64_t sequence) { return py::bytes(encode_sequence(sequence)); },
        py::arg("sequence"));
  m.def("decode_sequence", [](const py::buffer& frame) { return decode_sequence(bytes_of(frame)); },
        py::arg("frame"));
  m.def("encode_properties", [](const Properties& p) { return py::bytes(encode_properties(p)); },
        py::arg("properties"));
  m.def("decode_properties", [](const py::buffer& frame) { return decode_properties(bytes_of(frame)); },
        py::arg("frame"));
  m.def("new_uuid", [] { return py::bytes(new_uuid()); }, "16 random bytes (a version-4 UUID).");
  m.def("check_msgpack", [](const py::buffer& body) { check_msgpack(bytes_of(body)); }, py::arg("body"),
        "Raise KvstoreError unless the bytes are exactly one msgpack object.");
  m.def("check_key", [](const std::string& key) { check_key(key); }, py::arg("key"),
        "Raise KvstoreError unless a client may set this key.");
}

void bind_server(py::module_& m) {
  py::class_<ServerOptions>(m, "ServerOptions", "Where the server binds, its heartbeat and its bounds (server.hpp).")
      .def(py::init<>(), "The defaults of server.hpp; server_options(beamline) fills them from [kvstore].")
      .def_readwrite("bind_host", &ServerOptions::bind_host)
      .def_readwrite("port", &ServerOptions::port)
      .def_readwrite("heartbeat_ms", &ServerOptions::heartbeat_ms)
      .def_readwrite("status_name", &ServerOptions::status_name)
      .def_readwrite("max_value_bytes", &ServerOptions::max_value_bytes)
      .def_readwrite("max_keys", &ServerOptions::max_keys)
      .def_readwrite("max_map_bytes", &ServerOptions::max_map_bytes)
      .def_readwrite("max_keys_per_address", &ServerOptions::max_keys_per_address)
      .def_readwrite("max_map_bytes_per_address", &ServerOptions::max_map_bytes_per_address)
      .def_readwrite("max_stack_keys", &ServerOptions::max_stack_keys)
      .def_readwrite("max_stack_bytes", &ServerOptions::max_stack_bytes)
      .def_readwrite("max_ttl_s", &ServerOptions::max_ttl_s)
      .def_readwrite("scans_kept", &ServerOptions::scans_kept)
      .def_property(
          "log_dir", [](const ServerOptions& o) { return o.log.dir; },
          [](ServerOptions& o, std::string dir) { o.log.dir = std::move(dir); },
          "Where the durable records go ('' keeps none); a pair's server takes its own folder of it.")
      .def_property_readonly("log_fsync", [](const ServerOptions& o) { return std::string(to_string(o.log.fsync)); })
      .def_readwrite("curve", &ServerOptions::curve, "[security]: CurveServer (off by default).")
      .def_readwrite("producer_threads", &ServerOptions::producer_threads,
                     "[[receivers]] threads, one per receiver: with [security] on, the producer threads whose "
                     "status (status/producer/r<R>t<T>) the server takes; required then.")
      .def_property(
          "pair_role",
          [](const ServerOptions& o) {
            return std::string(o.pair.role == PairRole::kPrimary ? "primary"
                               : o.pair.role == PairRole::kBackup ? "backup"
                                                                  : "");
          },
          [](ServerOptions& o, const std::string& role) {
            if (role.empty()) {
              o.pair.role = PairRole::kNone;
            } else if (role == "primary") {
              o.pair.role = PairRole::kPrimary;
            } else if (role == "backup") {
              o.pair.role = PairRole::kBackup;
            } else {
              throw KvstoreError("pair role '" + role + "': expected primary, backup or '' (a single server)");
            }
          },
          "'primary' or 'backup' of a Binary Star pair (sectorflow kvstore --pair), '' for a single server.")
      .def_property(
          "peer_host", [](const ServerOptions& o) { return o.pair.peer_host; },
          [](ServerOptions& o, std::string host) { o.pair.peer_host = std::move(host); }, "The pair's other server.")
      .def_property(
          "peer_port", [](const ServerOptions& o) { return o.pair.peer_port; },
          [](ServerOptions& o, std::uint16_t port) { o.pair.peer_port = port; }, "The other server's P.");

  py::list kinds;
  for (const char* kind : kRefusalKinds) kinds.append(kind);
  m.attr("REFUSAL_KINDS") = py::tuple(kinds);

  py::class_<ServerStats>(m, "ServerStats", "Counters of a running server.")
      .def_readonly("sequence", &ServerStats::sequence)
      .def_readonly("keys", &ServerStats::keys)
      .def_readonly("map_bytes", &ServerStats::map_bytes)
      .def_readonly("updates", &ServerStats::updates)
      .def_readonly("bytes", &ServerStats::bytes)
      .def_readonly("snapshots", &ServerStats::snapshots)
      .def_readonly("expired", &ServerStats::expired)
      .def_readonly("malformed", &ServerStats::malformed)
      .def_readonly("last_malformed", &ServerStats::last_malformed)
      .def_readonly("oversized", &ServerStats::oversized)
      .def_readonly("refused_quota", &ServerStats::refused_quota)
      .def_readonly("refused_full", &ServerStats::refused_full)
      .def_readonly("ttl_clamped", &ServerStats::ttl_clamped)
      .def_readonly("snapshots_dropped", &ServerStats::snapshots_dropped)
      .def_readonly("errors", &ServerStats::errors)
      .def_readonly("unauthenticated", &ServerStats::unauthenticated)
      .def_readonly("unauthorised", &ServerStats::unauthorised)
      .def_readonly("creates_refused", &ServerStats::creates_refused)
      .def_readonly("refused_fold", &ServerStats::refused_fold)
      .def_readonly("scans_folded", &ServerStats::scans_folded)
      .def_readonly("summaries_dropped", &ServerStats::summaries_dropped)
      .def_readonly("folds_too_large", &ServerStats::folds_too_large)
      .def_readonly("log_records_loaded", &ServerStats::log_records_loaded)
      .def_readonly("log_tails_cut", &ServerStats::log_tails_cut)
      .def_readonly("log_bytes_cut", &ServerStats::log_bytes_cut)
      .def_readonly("log_cuts", &ServerStats::log_cuts, "One line per file whose tail was cut at start.")
      .def_readonly("log_compactions", &ServerStats::log_compactions)
      .def_readonly("log_write_errors", &ServerStats::log_write_errors)
      .def_readonly("log_failing", &ServerStats::log_failing)
      .def_readonly("log_error", &ServerStats::log_error)
      .def_readonly("log_bytes", &ServerStats::log_bytes)
      .def_readonly("pair_state", &ServerStats::pair_state)
      .def_readonly("peer_state", &ServerStats::peer_state)
      .def_readonly("failovers", &ServerStats::failovers)
      .def_readonly("splits", &ServerStats::splits)
      .def_readonly("snapshots_refused", &ServerStats::snapshots_refused)
      .def_readonly("mirrored", &ServerStats::mirrored)
      .def_readonly("mirror_syncs", &ServerStats::mirror_syncs)
      .def_readonly("pending", &ServerStats::pending)
      .def_readonly("pending_applied", &ServerStats::pending_applied)
      .def_readonly("pending_lost", &ServerStats::pending_lost)
      .def_readonly("pending_unmatched", &ServerStats::pending_unmatched)
      .def_readonly("first_refusals", &ServerStats::first_refusals,
                    "kind (REFUSAL_KINDS) -> why the first refusal of that kind happened.")
      .def("refusals", &ServerStats::refusals, py::arg("kind"), "The counter of one of REFUSAL_KINDS.");

  py::class_<Server>(m, "Server", "The Clone-pattern server; binds P, P+1, P+2 when constructed.")
      .def(py::init<ServerOptions>(), py::arg("options"))
      .def("run", &Server::run, py::call_guard<py::gil_scoped_release>(),
           "Serve until stop(); releases the GIL. Call it from a thread other than the one that stops it.")
      .def("stop", &Server::stop, "Make run() return; callable from any thread.")
      .def("set_state",
           [](Server& server, const std::string& name) {
             const std::optional<protocol::ServiceState> state = protocol::parse_service_state(name);
             if (!state) throw KvstoreError("'" + name + "' is not a service state");
             server.set_state(*state);
           },
           py::arg("state"), "The state the server's status says (published at once); callable from any thread.")
      .def("stats", &Server::stats)
      .def("take_pair_events", &Server::take_pair_events,
           "One line per change of the pair's state since the last call (empty for a single server).")
      .def("take_security_refusals", &Server::take_security_refusals,
           "One line per peer key refused at the handshake for the first time since the last call.")
      .def_property_readonly("options", &Server::options)
      .def_property_readonly("stack_id", &Server::stack_id,
                             "The stack's id: kept in the log_dir, or new at every start without one.")
      .def("endpoint", &Server::endpoint, py::arg("offset"),
           "tcp://host:P+offset: 0 snapshots (ROUTER), 1 updates published (PUB), 2 updates collected (SUB).");
}

void bind_client(py::module_& m) {
  py::enum_<ClientState>(m, "ClientState")
      .value("CONNECTING", ClientState::kConnecting)
      .value("SYNCING", ClientState::kSyncing)
      .value("ACTIVE", ClientState::kActive)
      .value("CLOSED", ClientState::kClosed)
      .def("__str__", [](ClientState state) { return std::string(to_string(state)); });

  const auto forward = [](const py::function& function) {
    return [call = PyCallable(function)](const std::string& message) {
      call.invoke([&message](const py::function& f) { f(message); });
    };
  };
  py::class_<ClientOptions>(m, "ClientOptions", "Where the server is and how the replica behaves.")
      .def(py::init<>(), "The defaults of client.hpp; client_options(beamline, subtree) fills them from [kvstore].")
      .def("set_log", [forward](ClientOptions& o, const py::function& log) { o.log = forward(log); }, py::arg("log"),
           "log(message: str) is called on the agent thread on each state change and resync.")
      .def("set_warn", [forward](ClientOptions& o, const py::function& warn) { o.warn = forward(warn); },
           py::arg("warn"), "warn(message: str) when a sync finds the server another stack than the last (log without it).")
      .def_readwrite("host", &ClientOptions::host)
      .def_readwrite("port", &ClientOptions::port)
      .def_readwrite("servers", &ClientOptions::servers)
      .def_readwrite("first_server", &ClientOptions::first_server,
                     "\"host:port\" of the server to talk to first (empty: the primary)")
      .def_readwrite("subtree", &ClientOptions::subtree)
      .def_readwrite("heartbeat_ms", &ClientOptions::heartbeat_ms)
      .def_readwrite("silence_heartbeats", &ClientOptions::silence_heartbeats)
      .def_readwrite("max_value_bytes", &ClientOptions::max_value_bytes)
      .def_readwrite("max_ttl_s", &ClientOptions::max_ttl_s)
      .def_readwrite("curve", &ClientOptions::curve, "[security]: CurveClient (off by default).");

  py::class_<ClientStats>(m, "ClientStats", "Counters of a client's agent.")
      .def_readonly("snapshots", &ClientStats::snapshots)
      .def_readonly("updates", &ClientStats::updates)
      .def_readonly("stale", &ClientStats::stale)
      .def_readonly("resyncs", &ClientStats::resyncs)
      .def_readonly("malformed", &ClientStats::malformed)
      .def_readonly("sent", &ClientStats::sent)
      .def_readonly("errors", &ClientStats::errors)
      .def_readonly("server_moves", &ClientStats::server_moves)
      .def_readonly("unmirrored", &ClientStats::unmirrored);

  py::class_<Client, std::unique_ptr<Client, ReleaseGilDelete>>(
      m, "Client", "A live replica of the kvstore; a background agent thread owns the sockets.")
      .def(py::init<ClientOptions>(), py::arg("options"))
      .def("set", [](Client& c, const std::string& key, const py::buffer& value, double ttl_s) {
             c.set(key, bytes_of(value), ttl_s);
           },
           py::arg("key"), py::arg("value"), py::arg("ttl_s") = 0.0,
           "Set one of this client's own keys to msgpack bytes (copied); refreshed every ttl_s/3, deleted "
           "on close. Never waits for the network.")
      .def("set_once", [](Client& c, const std::string& key, const py::buffer& value, double ttl_s) {
             c.set_once(key, bytes_of(value), ttl_s);
           },
           py::arg("key"), py::arg("value"), py::arg("ttl_s") = 0.0,
           "Write a key once without owning it (kept after close).")
      .def("create_once", [](Client& c, const std::string& key, const py::buffer& value, double ttl_s) {
             c.create_once(key, bytes_of(value), ttl_s);
           },
           py::arg("key"), py::arg("value"), py::arg("ttl_s") = 0.0,
           "set_once that the server takes only if the key is absent: of several creators exactly one wins, "
           "and get() shows whose value the key holds once it reaches the replica.")
      .def("erase", &Client::erase, py::arg("key"), "Delete a key on the server.")
      .def("get", [](const Client& c, const std::string& key) { return optional_bytes(c.get(key)); }, py::arg("key"),
           "The replica's value (bytes) of a key, or None.")
      .def("subtree", [](const Client& c, const std::string& prefix) { return bytes_dict(c.subtree(prefix)); },
           py::arg("prefix") = "", "Every key of the replica starting with prefix -> value bytes.")
      .def("sequence", &Client::sequence)
      .def_property_readonly("state", &Client::state)
      .def("synced", &Client::synced)
      .def("wait_synced", [](const Client& c, double timeout_s) {
             py::gil_scoped_release release;
             return c.wait_synced(std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000.0)));
           },
           py::arg("timeout_s"), "Wait until the replica is complete and live; returns synced().")
      .def("stats", &Client::stats)
      .def_property_readonly("stack_id", [](const Client& c) { return c.stack().id; },
                             "The stack id of the server's last snapshot; \"\" before one named a stack.")
      .def_property_readonly("first_stack_id", [](const Client& c) { return c.stack().first; },
                             "The stack id of the first snapshot that named one: the stack this client joined.")
      .def_property_readonly("server", &Client::server,
                             "\"host:port\" of the server the agent syncs with (of a pair: the one it moved to last).")
      .def_property_readonly("options", &Client::options)
      .def("on_change", [](Client& c, const std::string& prefix, const py::function& callback) {
             return c.on_change(prefix, [call = PyCallable(callback)](const std::string& key,
                                                                      const std::optional<std::string>& value) {
               call.invoke([&](const py::function& f) { f(py::str(key), optional_bytes(value)); });
             });
           },
           py::arg("prefix"), py::arg("callback"),
           "callback(key: str, value: bytes | None) runs on the agent thread (holding the GIL) after each "
           "change under prefix; returns an id for remove_callback.")
      .def("remove_callback", &Client::remove_callback, py::arg("id"))
      .def("close", &Client::close, py::call_guard<py::gil_scoped_release>(),
           "Send pending writes, delete own keys, stop the agent. Idempotent.");
}

}  // namespace

void bind_kvstore(py::module_& m) {
  py::register_exception<KvstoreError>(m, "KvstoreError",
                                       py::module_::import("sectorflow.errors").attr("SectorflowError").ptr());
  bind_kvmsg(m);
  bind_stack_id(m);
  bind_pair_table(m);
  bind_server(m);
  bind_client(m);
  // The one mapping of [kvstore] (from_config.hpp); sectorflow.kvstore.options adds what a process owns.
  m.def("server_options", &kvstore::server_options, py::arg("beamline"),
        "Where the server binds, its heartbeat, its bounds, its durable log and the receivers' producer threads.");
  m.def("client_options", &kvstore::unkeyed_client_options, py::arg("beamline"), py::arg("subtree") = "",
        "How a client reaches the server and what it may send; no CURVE keys.");
}

}  // namespace sectorflow::bindings
