// The kvstore client: a local replica of the server's map (or of one subtree of it), kept up to
// date by a background agent thread that owns the sockets (the Clone pattern's client, ZeroMQ
// Guide chapter 5; frames in kvmsg.hpp, server in server.hpp).
//
// The agent connects a SUB socket to P + 1, a DEALER to P and an XPUB to P + 2, then:
//   connecting  waits for the first message on SUB (a HUGZ at the latest), which proves that its
//               subscription is live, so no update can fall between snapshot and stream
//   syncing     sends ICANHAZ? + subtree, stores the KVSYNCs, buffers the published updates and on
//               KTHXBAI replaces the replica and applies the buffered updates newer than it
//   active      applies every update newer than the replica's sequence, in order, and discards the
//               stale ones. A full replica (empty subtree) resyncs on a gap; every replica resyncs
//               when a HUGZ carries a sequence lower than its own (the server restarted) or the
//               server subscribes to the XPUB again (it reconnected).
// When nothing (update or HUGZ) has come for silence_heartbeats heartbeats, the agent closes its
// sockets and starts again at connecting. A snapshot whose next message has not come within that
// time (the server drops the replies of clients that do not read, server.hpp) is asked for again.
//
// Pair: with two servers (ClientOptions::servers, primary first; kvstore/SPEC.md "The pair") the
// agent holds an XPUB to each server's P + 2 for the whole life of the client, and every write goes
// to both (with one uuid; to the other server only while its collector subscribes, as a best
// effort: what its full queue refuses is counted in unmirrored). Its SUB and DEALER talk to one
// server at a time, the current one. While syncing only the snapshot reply counts as the current
// server's life (a passive's HUGZ do not), while connecting or active any message does; a silence
// period without it moves the agent to the other server: new SUB and DEALER there, a full resync,
// and its own keys written again (counted in server_moves, one log line per move). With one server
// the agent never moves and keeps its sockets while connecting, as above.
//
// Bounds: every socket sets ZMQ_MAXMSGSIZE from max_value_bytes (kvmsg.hpp); set() refuses a value
// above max_value_bytes or a ttl above max_ttl_s (the server would refuse or clamp them). A message
// from the server that throws while it is handled is counted (ClientStats::errors), the first of
// each kind logged, and skipped: the agent goes on.
//
// Keys written with set() are this client's own: the agent sends them as soon as the server
// subscribes to its XPUB, refreshes those with a ttl every ttl/3 while the client lives, sends them
// again whenever the server (re)subscribes (a restarted server is re-populated by its clients) and
// deletes them when the client closes (goodbye). A client that is killed leaves them to expire.
// Writes reach the server in the order of the calls; several set() of one key made before the
// agent sends it coalesce into the last value. Nothing is dropped on the way: writes wait in the
// agent until the server listens and while the XPUB's queue is full.
//
// Stack: every snapshot carries the server's status, whose stack_id names the stack (stack_id.hpp).
// The client keeps the id of its first one and of its last one (stack()). When a sync finds another
// id than the last (the server restarted without its log_dir, or another stack's server answers on
// these ports), `warn` is told once, naming both. Every status the client writes (a key under
// status/ that decodes as a ServiceStatus, own or set_once) leaves with the stack fields set
// (set_stack_fields: stack_id, and stack_changed with the first id once the stack changed); own
// statuses are stamped again and sent when the stack changes. So every service says which stack
// it is in, and that it was moved to another, without a line of its own.
//
// With a pair, every status the client writes also says the server of its last sync (kServerField,
// "host:port"), stamped like the stack fields and sent again after each move.
//
// Threads: every public method is thread-safe. set(), set_once() and erase() only queue a command
// and never wait for the network; get(), subtree() and sequence() read the replica under a shared
// lock. Change callbacks and the log function run on the agent thread: keep them short, and do not
// call close() or destroy the Client from them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sectorflow/kvstore/stack_id.hpp"
#include "sectorflow/security/curve.hpp"

namespace sectorflow::kvstore {

/// The status field that names the server a client of a pair last synced with ("host:port").
inline constexpr std::string_view kServerField = "kvstore_server";
/// Binary Star: a primary and a backup.
inline constexpr std::size_t kMaxServers = 2;

/// One kvstore server: its address and snapshot port P.
struct ServerAddress {
  std::string host;
  std::uint16_t port = 0;
  /// "host:port"
  std::string text() const { return host + ":" + std::to_string(port); }
};

/// host, port, heartbeat_ms, silence_heartbeats, max_value_bytes and max_ttl_s come from the
/// [kvstore] table (kvstore/options.py client_options; kvstore::client_options of
/// from_config.hpp for a C++ program), the server's own: none has a default here, and the Client refuses one left at 0, naming it.
struct ClientOptions {
  std::string host;                  ///< host: server address
  std::uint16_t port = 0;            ///< port: the server's snapshot port P
  /// servers: "host:port" of each server of the pair, primary first; empty: the one at host and port.
  std::vector<std::string> servers;
  /// first_server: the entry of `servers` to talk to first (empty: the primary). A process that
  /// already knows which server is active starts there, not a silence period later.
  std::string first_server;
  std::string subtree;               ///< key prefix of the replica; "" holds everything
  std::uint32_t heartbeat_ms = 0;    ///< heartbeat_ms: the server's HUGZ interval
  int silence_heartbeats = 0;        ///< silence_heartbeats: missed heartbeats before reconnecting
  /// Optional; told about each state change and resync, on the agent thread.
  std::function<void(const std::string& message)> log;
  /// Optional; told, on the agent thread, when a sync finds the server another stack than the
  /// last one (a warning: see "Stack" above). Without it, `log` is told.
  std::function<void(const std::string& message)> warn;
  std::size_t max_value_bytes = 0;   ///< max_value_bytes, the server's: larger values are refused here
  double max_ttl_s = 0.0;            ///< max_ttl_s, the server's: longer ttls are refused here
  /// [security]: this process's key pair and the server's public key; off: plain TCP.
  security::CurveClient curve;
};

enum class ClientState { kConnecting, kSyncing, kActive, kClosed };

/// "connecting", "syncing", "active", "closed".
const char* to_string(ClientState state);

struct ClientStats {
  std::uint64_t snapshots = 0;  ///< completed snapshots (the first sync and every resync)
  std::uint64_t updates = 0;    ///< published updates applied to the replica
  std::uint64_t stale = 0;      ///< published updates discarded as not newer than the replica
  std::uint64_t resyncs = 0;    ///< gaps, server restarts and silences that forced a new snapshot
  std::uint64_t malformed = 0;  ///< messages from the server that did not decode
  std::uint64_t sent = 0;       ///< KVSETs sent (sets, refreshes, republications, deletions)
  std::uint64_t errors = 0;     ///< messages or commands that threw while handled (the agent went on)
  std::uint64_t server_moves = 0;  ///< moves to the other server of a pair after the current one fell silent
  std::uint64_t unmirrored = 0;    ///< writes the other server of a pair did not get: its queue was full
};

/// The servers a client of `options` uses, primary first: `servers` parsed, or the one at host and port.
/// Throws KvstoreError, naming the entry, for one that is not "host:port", a port out of 1..65533, a
/// server listed twice or more than kMaxServers.
std::vector<ServerAddress> server_addresses(const ClientOptions& options);

/// The index in server_addresses(options) of `first_server` (0 when it is empty). Throws
/// KvstoreError for a first_server that is not one of `servers`.
std::size_t first_server_index(const ClientOptions& options);

/// Called with the key and its new value, or std::nullopt when the key was deleted.
using ChangeCallback = std::function<void(const std::string& key, const std::optional<std::string>& value)>;

class Client {
 public:
  /// Starts the agent; returns at once (see wait_synced). Throws KvstoreError for empty host,
  /// port 0 or out of range, a heartbeat or silence that is not positive, or max_value_bytes or
  /// max_ttl_s out of the server's ranges.
  explicit Client(ClientOptions options);
  /// close().
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Sets one of this client's own keys to `value` (msgpack bytes; the caller's buffer is copied).
  /// With ttl_s > 0 the server deletes the key ttl_s seconds after the last refresh; the client
  /// refreshes it every ttl_s / 3 while it lives. Never blocks on the network. Throws KvstoreError
  /// for an invalid key, an empty value (use erase), a value that is not one msgpack object or is
  /// larger than max_value_bytes, a ttl above max_ttl_s, or after close().
  void set(const std::string& key, std::string value, double ttl_s = 0.0);
  /// Writes a key once without owning it: not refreshed, not republished, kept after close()
  /// (which waits up to one silence period for the server to take it). For requests such as
  /// acquire/request. Throws like set().
  void set_once(const std::string& key, std::string value, double ttl_s = 0.0);
  /// set_once() that the server takes only if the key is absent (refused_exists otherwise): of
  /// several clients creating one key, exactly one wins, and get() shows whose value it is once the
  /// key reaches the replica. For claims such as a scan number. Throws like set().
  void create_once(const std::string& key, std::string value, double ttl_s = 0.0);
  /// Deletes a key (own or not) on the server; it stops being one of this client's own keys.
  /// Never blocks on the network. Throws KvstoreError for an invalid key or after close().
  void erase(const std::string& key);

  /// The replica's value of a key, or std::nullopt. A set() shows here once the server has
  /// published it (when the key is inside this replica's subtree).
  std::optional<std::string> get(const std::string& key) const;
  /// Every key of the replica starting with `prefix`, with its value.
  std::map<std::string, std::string> subtree(const std::string& prefix = "") const;
  /// Sequence of the last update applied to the replica (0 before the first snapshot).
  std::int64_t sequence() const;
  ClientState state() const;
  /// True while the replica is complete and live (state active).
  bool synced() const;
  /// Waits until synced() or the timeout; returns synced().
  bool wait_synced(std::chrono::milliseconds timeout) const;
  ClientStats stats() const;
  /// The stack of the server's last snapshot and the stack this client first synced with.
  StackIdentity stack() const;
  /// "host:port" of the server the agent syncs with (or tries to): with a pair, the one it moved to last.
  std::string server() const;
  const ClientOptions& options() const;

  /// Calls `callback` on the agent thread after each change of a key starting with `prefix`
  /// (including the changes a resync brings). Values equal to the replica's are no change.
  /// Returns an id for remove_callback.
  std::uint64_t on_change(const std::string& prefix, ChangeCallback callback);
  /// Stops calls to a callback; a call already started (or about to start) on the agent thread
  /// still runs. Unknown ids are ignored.
  void remove_callback(std::uint64_t id);

  /// Sends pending one-shot writes, deletes the own keys (goodbye), stops the agent and closes
  /// the sockets. Idempotent. The replica stays readable. Must not be called from a callback.
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sectorflow::kvstore
