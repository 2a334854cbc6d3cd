// The kvstore server: the Clone pattern's server (ZeroMQ Guide, chapter 5, CHP; see kvmsg.hpp for
// the frames). It holds the map and the sequence and binds three sockets on consecutive ports
// (kvstore/src/store.hpp: the Clone core; kvstore/src/pair_link.hpp: a pair's link and mirror):
//
//   P     ROUTER  snapshots: ["ICANHAZ?", subtree] is answered with one KVSYNC per key starting
//                 with the subtree (and one of the server's own status if it does not), then
//                 KTHXBAI carrying the current sequence and the subtree
//   P + 1 PUB     every accepted update (KVPUB, a new sequence each), and HUGZ every heartbeat
//                 carrying the current sequence
//   P + 2 SUB     client updates (KVSET) from PUB sockets (the Guide's clone client) or XPUB
//                 sockets (sectorflow's Client); subscribed to everything
//
// A KVSET with a "ttl" property (seconds) expires unless set again in time; the expiry is published
// as a deletion (empty body). A KVSET with "create=1" is taken only while its key is absent, else
// refused (counted creates_refused): the server's one thread makes it a claim that exactly one writer wins. An empty body deletes the key. A message that is not a valid kvmsg,
// uses a command word or the server's own status key as key, has a bad ttl or a body that is not
// one msgpack object is dropped and counted as malformed.
//
// Bounds (ServerOptions; every refusal is counted by kind, ServerStats, and published):
//   - frames: ZMQ_MAXMSGSIZE = max_frame_bytes(max_value_bytes) on the three sockets (kvmsg.hpp);
//     a body above max_value_bytes is refused as oversized; only the first kKvmsgFrames + 1 frames
//     of a message are kept.
//   - the map: at most max_keys keys and max_map_bytes bytes (key + properties + body) of clients;
//     a new key or a larger value beyond them is refused (refused_full). Each key is charged to the
//     address that last wrote it ("Peer-Address" of the message, so every service of a host shares
//     one account): at most max_keys_per_address keys and max_map_bytes_per_address bytes each
//     (refused_quota). Refreshing or shrinking a key one already holds is never refused; deleting
//     never is. With CURVE each key is charged to the writer's identity (its ZAP User-Id), not its
//     address. The stack's own records (which they are, and how they group, is the StackPolicy's:
//     stack_policy.hpp; sectorflow's are nodegroups/, status/, acquire/, scans/, a group per scan)
//     are charged to a room of their own, max_stack_keys and max_stack_bytes, that no other key
//     takes: when it is full the oldest group's records (first written longest ago) are erased to
//     make room (counted scans_evicted), never the group being written; only what still does not
//     fit is refused (refused_full).
//   - folded groups: when the policy says a group is over (sectorflow's: a scan's request, every
//     producer part final, its file record) the server replaces its keys by the one fold it writes
//     itself (scans/<n>/summary), which no client may write (refused_fold); at most scans_kept
//     groups keep a fold, the one folded longest ago is erased first (summaries_dropped).
//     kvstore/SPEC.md, "Folding".
//   - ttl: clamped to max_ttl_s (counted ttl_clamped); the KVPUB carries the clamped ttl.
//   - snapshots: the ROUTER queues at most kSnapshotHwm messages per peer and is mandatory (a full
//     pipe is seen). A reply that does not fit waits, as the list of the messages it still has to
//     send, taken when asked (a consistent snapshot), and goes on as the peer reads. A peer has one
//     such reply at most: asking again drops the older. At most kMaxWaitingSnapshots wait; a reply
//     whose peer read nothing for kStalledHeartbeats heartbeats, or left, is dropped. Dropped
//     replies are counted (snapshots_dropped). So a client that asks and never reads costs one
//     pipe and one list, however often it asks, while a client that reads gets whole snapshots of
//     any map.
//   - one message that throws (std::exception) in the loop is counted (errors) and skipped; the
//     loop ends only on stop() or a socket failure.
// Durable records (ServerOptions::log, record_log.hpp; kvstore/SPEC.md, "Durable records"): with a
// log_dir every update the server publishes, its own status included, is appended to the log before
// it is sent, with its sequence and its ttl as an absolute deadline; a log past log_max_bytes is
// compacted (the live map written as a new snapshot, a new log begun). At start the server loads
// snapshot and log (a torn or corrupt tail cut and counted), continues the sequence above the last
// record, and compacts. A write that fails later is counted (log_write_errors), the log is closed
// and the server serves from memory (log_failing), trying a compaction at every heartbeat until
// one succeeds, which writes the whole map and resumes the log.
// The pair (ServerOptions::pair; kvstore/SPEC.md, "The pair"): a server of a Binary Star pair also
// binds P + 3, a PUB of its pair state (one frame, every heartbeat and at every change), and connects
// a SUB to its peer's P + 3; the PairMachine (pair_state.hpp) driven by the peer's states and by the
// clients' snapshot requests (the vote) says whether it is active. Active, it serves as a single
// server. Otherwise it answers no snapshot the machine does not serve (snapshots_refused), publishes
// no update and no status, expires no ttl, and keeps the clients' KVSETs as pending (at most
// kMaxPending writes and max_map_bytes; the oldest dropped past either, pending_lost) until the active's KVPUB of the same uuid
// comes; passive, it mirrors the active (a snapshot of everything, then its KVPUBs with their
// sequences, each appended to its own log; its HUGZ carry the mirrored sequence; the active's stack
// id written to its log_dir). Becoming active, it applies what is still pending.
// With CURVE on a pair, the peer link (P + 3) admits the kvstore key alone (ZAP domain
// "kvstore-pair"), the peer's SUB and the passive's mirror are CURVE clients with that one key pair,
// the kvstore identity may read but writes nothing, every KVPUB names its writer (the "writer"
// property) so that the passive holds keys for the same identities, and a pending write is judged
// by its sender's identity when applied (kvstore/SPEC.md, "The pair"). Whose snapshot requests
// vote is the StackPolicy's.
// The server publishes its own ServiceStatus under status/kvstore/<name> (extra fields: stack_id,
// malformed, snapshots, expired, keys, map_bytes and the refusal counters of ServerStats) at the
// first heartbeat after it changes. Every snapshot reply carries that status, whatever its subtree:
// its stack_id tells each client which stack it synced with (stack_id.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sectorflow/kvstore/record_log.hpp"
#include "sectorflow/kvstore/stack_policy.hpp"
#include "sectorflow/protocol/service_state.hpp"
#include "sectorflow/security/curve.hpp"

namespace sectorflow::kvstore {

/// Messages a snapshot reply may queue in one peer's pipe (ZMQ_SNDHWM of the ROUTER).
inline constexpr int kSnapshotHwm = 1000;
/// Snapshot replies that may wait for their peers to read at one time.
inline constexpr std::size_t kMaxWaitingSnapshots = 64;
/// Heartbeats after which a waiting snapshot reply whose peer read nothing is dropped.
inline constexpr int kStalledHeartbeats = 10;

/// Writes a passive holds as pending at most (kvstore/SPEC.md, "The pair").
inline constexpr std::size_t kMaxPending = 10000;
/// Heartbeats after which a pending write the live active has not published is dropped: the
/// active refused it (pending_unmatched).
inline constexpr int kPendingHeartbeats = 20;

/// Which server of a Binary Star pair this one is (`sectorflow kvstore --pair`), or none.
enum class PairRole { kNone, kPrimary, kBackup };

/// The pair: this server's role and where its peer listens (its P; the peer link is P + 3).
struct PairOptions {
  PairRole role = PairRole::kNone;
  std::string peer_host;
  std::uint16_t peer_port = 0;
};

/// Every value but status_name comes from the [kvstore] table (kvstore/options.py server_options;
/// kvstore::server_options of from_config.hpp for a C++ program): none has a default here, and the
/// Server refuses one left at 0, naming it.
struct ServerOptions {
  std::string bind_host;                     ///< bind_host: interface to bind ("0.0.0.0" for all)
  std::uint16_t port = 0;                    ///< port: snapshot port P; P + 1 and P + 2 are used too
  std::uint32_t heartbeat_ms = 0;            ///< heartbeat_ms: HUGZ interval
  std::string status_name = "server";        ///< not configuration: publishes status/kvstore/<status_name>
  std::size_t max_value_bytes = 0;           ///< max_value_bytes: largest body accepted (frames up to twice, kvmsg.hpp)
  std::size_t max_keys = 0;                  ///< max_keys: clients' keys in the map
  std::size_t max_map_bytes = 0;             ///< max_map_bytes: clients' key + properties + body bytes in the map
  std::size_t max_keys_per_address = 0;      ///< max_keys_per_address: keys last written from one network address
  std::size_t max_map_bytes_per_address = 0; ///< max_map_bytes_per_address: their bytes
  std::size_t max_stack_keys = 120000;  ///< max_stack_keys: the stack's own keys, apart from the rest
  std::size_t max_stack_bytes = std::size_t{128} << 20;  ///< max_stack_bytes: their bytes
  double max_ttl_s = 0.0;                    ///< max_ttl_s: longer ttls are clamped to this
  /// scans_kept: folded scans (a scans/<n>/summary) kept; past it the oldest scan's summary goes.
  std::size_t scans_kept = 10000;
  /// [security]: the server's key pair and the allowlist of every role (domain "kvstore"); off:
  /// plain TCP and no authorisation. On: a ZAP handler refuses unknown keys at the handshake, and
  /// each write is checked by the StackPolicy (sectorflow's: its writer's role, write_policy.hpp,
  /// and the scan's request). A server of a pair needs
  /// the kvstore role's key in the allowlist (its peer's; refused without), which alone its peer
  /// link admits.
  security::CurveServer curve;
  /// [[receivers]] threads, one entry per receiver, for sectorflow's StackPolicy
  /// (scan_stack_policy): with [security] on, a producer's status (status/producer/r<R>t<T>) is
  /// taken only for a thread the stack has, so that one producer key cannot fill the stack's room
  /// with statuses of threads that do not exist (refused and counted unauthorised). Required
  /// (non-empty) with [security] on.
  std::vector<std::uint32_t> producer_threads;
  /// [kvstore] log_dir, log_fsync, log_fsync_interval_ms, log_max_bytes: the durable records
  /// (record_log.hpp); an empty dir keeps the map in memory only.
  RecordLogOptions log;
  /// `sectorflow kvstore --pair` with [kvstore] servers: none for a single server.
  PairOptions pair;
};

/// The refusal counters of ServerStats, by the names the status fields and first_refusals use.
inline constexpr const char* kRefusalKinds[] = {"malformed",    "oversized",         "refused_quota",   "refused_full",
                                                "ttl_clamped",  "snapshots_dropped", "errors",          "unauthenticated",
                                                "unauthorised", "refused_fold"};

struct ServerStats {
  std::int64_t sequence = 0;    ///< sequence of the last published update
  std::uint64_t keys = 0;       ///< keys in the map
  std::uint64_t map_bytes = 0;  ///< bytes (key + properties + body) of the clients' keys
  std::uint64_t updates = 0;    ///< accepted KVSETs (sets, refreshes and deletions)
  std::uint64_t bytes = 0;      ///< body bytes of the accepted KVSETs
  std::uint64_t snapshots = 0;  ///< ICANHAZ? requests answered whole
  std::uint64_t expired = 0;    ///< keys deleted because their ttl ran out
  std::uint64_t refused_stack = 0;  ///< of refused_full: the stack's own records (its room full, no scan left to erase)
  std::uint64_t scans_evicted = 0;  ///< scans whose records were erased to make room for a newer scan's
  std::uint64_t malformed = 0;  ///< rejected messages on the snapshot and collector ports
  std::string last_malformed;   ///< why the last one was rejected
  std::uint64_t oversized = 0;          ///< KVSETs whose body passed max_value_bytes
  std::uint64_t refused_quota = 0;      ///< KVSETs refused: their address holds its share of the map
  std::uint64_t refused_full = 0;       ///< KVSETs refused: the map holds max_keys or max_map_bytes
  std::uint64_t ttl_clamped = 0;        ///< KVSETs whose ttl was cut to max_ttl_s
  std::uint64_t snapshots_dropped = 0;  ///< snapshot replies abandoned before their end
  std::uint64_t errors = 0;             ///< messages that threw in the server loop
  std::uint64_t unauthenticated = 0;    ///< CURVE handshakes refused by the ZAP handler (unknown keys)
  std::uint64_t unauthorised = 0;       ///< KVSETs refused: the writer's role may not write that key
  std::uint64_t refused_fold = 0;       ///< KVSETs refused: a client wrote a scan's summary, which only the server folds
  std::uint64_t folds_too_large = 0;    ///< scans over whose summary would pass max_value_bytes: their parts stay
  std::uint64_t scans_folded = 0;       ///< scans whose parts a summary replaced
  std::uint64_t summaries_dropped = 0;  ///< folded scans erased past scans_kept, oldest first
  /// Create KVSETs refused because their key exists: a claim another writer won. Not a fault, so
  /// not among kRefusalKinds (no alert); published as the status field creates_refused.
  std::uint64_t creates_refused = 0;
  std::map<std::string, std::string> first_refusals;  ///< kind (kRefusalKinds) -> why the first one happened

  // The durable records (all 0 without a log_dir).
  std::uint64_t log_records_loaded = 0;  ///< records applied from the snapshot and the log at start
  std::uint64_t log_tails_cut = 0;       ///< files whose torn or corrupt tail was cut at start
  std::uint64_t log_bytes_cut = 0;       ///< bytes cut from them
  std::vector<std::string> log_cuts;     ///< one line per cut: the file, where, why
  std::uint64_t log_compactions = 0;     ///< snapshots written (the one at start included)
  std::uint64_t log_write_errors = 0;    ///< appends, syncs or compactions that failed
  bool log_failing = false;  ///< the last write failed: serving from memory until a compaction succeeds
  std::string log_error;     ///< the last write failure
  std::uint64_t log_bytes = 0;  ///< bytes of the log file now

  // The pair (all 0 and "" for a single server).
  std::string pair_state;        ///< this server's PairState name
  std::string peer_state;        ///< the state its peer last said, "silent" past the silence period, "" never heard
  std::uint64_t failovers = 0;   ///< times this server went from passive to active (the active was silent, a client asked)
  std::uint64_t splits = 0;      ///< times this server yielded as one of two actives (what it took alone is lost)
  std::uint64_t snapshots_refused = 0;  ///< snapshot requests left unanswered: not active, and the machine said no
  std::uint64_t mirrored = 0;    ///< the active's updates applied while passive
  std::uint64_t mirror_syncs = 0;  ///< snapshots of the active taken (one per passive spell, more after a gap)
  std::uint64_t pending = 0;     ///< clients' writes held now, waiting for the active's KVPUB
  std::uint64_t pending_applied = 0;    ///< held writes applied on becoming active
  std::uint64_t pending_lost = 0;       ///< held writes dropped past kMaxPending: lost if the active did not publish them
  std::uint64_t pending_unmatched = 0;  ///< held writes the live active never published (it refused them)

  /// The counter of one of kRefusalKinds; throws KvstoreError for another name.
  std::uint64_t refusals(const std::string& kind) const;
};

class Server {
 public:
  /// Binds the three sockets and, with a log_dir, loads the durable records (snapshot and log) and
  /// compacts them into a new snapshot. Throws KvstoreError for options out of range (naming the
  /// option), naming the address if a socket cannot be bound (port taken, unknown interface), or
  /// naming the log_dir if it cannot be used; nothing stays bound then.
  explicit Server(ServerOptions options);
  /// As above, with the stack's policy (stack_policy.hpp) in place of sectorflow's own
  /// (scan_stack_policy(options.producer_threads), which the one-argument form uses).
  Server(ServerOptions options, std::unique_ptr<const StackPolicy> policy);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Serves until stop() is called, then returns; returns at once if stop() came first. Call it
  /// from one thread at a time. Throws zmq::error_t on an unexpected socket failure.
  void run();
  /// Makes run() return within one poll wakeup. Thread-safe and async-signal-safe.
  void stop() noexcept;
  /// The state the server's own status says (idle while it serves, set by the daemon that runs
  /// it); published at once. Thread-safe.
  void set_state(protocol::ServiceState state) noexcept;

  /// A consistent copy of the counters; thread-safe.
  ServerStats stats() const;
  /// One line per peer key refused at the handshake for the first time since the last call
  /// (ZapHandler::take_refusals); empty without CURVE. Thread-safe.
  std::vector<std::string> take_security_refusals();
  /// One line per change of the pair's state (and per pending write lost) since the last call,
  /// for the daemon's log; empty for a single server. Thread-safe.
  std::vector<std::string> take_pair_events();
  const ServerOptions& options() const;
  /// The stack's id (stack_id.hpp): kept in the log_dir (made at the first start there), or new
  /// at every start without one. Published as the stack_id of the server's status.
  const std::string& stack_id() const;
  /// "tcp://<bind_host>:<port + offset>": offset 0 snapshots, 1 publisher, 2 collector, 3 pair state.
  std::string endpoint(int offset) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sectorflow::kvstore
