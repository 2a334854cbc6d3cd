#include "sectorflow/kvstore/server.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "map_usage.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"
#include "sectorflow/kvstore/pair_state.hpp"
#include "sectorflow/kvstore/record_log.hpp"
#include "sectorflow/kvstore/stack_id.hpp"
#include "sectorflow/kvstore/stack_policy.hpp"
#include "sectorflow/kvstore/wakeup.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/security/zap_handler.hpp"
#include "snapshots.hpp"

namespace sectorflow::kvstore {
namespace {

using Clock = std::chrono::steady_clock;

// Wall-clock milliseconds since the Unix epoch: the log's deadlines outlive the steady clock.
std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Messages read from one socket per wakeup, so that a flood on one port cannot starve the other
// port, the heartbeat or the ttl expiry.
constexpr int kBatch = 256;
// Queued KVPUBs per subscriber before ZeroMQ drops (the subscriber then sees a gap and resyncs).
constexpr int kPublisherHwm = 100000;
// How often waiting snapshot replies are offered to their peers' pipes again: ZeroMQ does not say
// when one peer's pipe has room.
constexpr auto kSnapshotRetry = std::chrono::milliseconds(5);
// The peer counts as gone after this many heartbeats without its state (kvstore/SPEC.md, "The pair").
constexpr int kPeerSilenceHeartbeats = 2;
// ZMQ_MAXMSGSIZE of the peer link's sockets, without and with CURVE: a state is one short word, and
// CURVE's handshake commands (an INITIATE of some 300 bytes) pass through the same limit.
constexpr std::int64_t kPeerLinkFrameBytes = 64;
constexpr std::int64_t kPeerLinkCurveFrameBytes = 1024;
// The ZAP domain of the peer link, and the identity prefix of the kvstore role's key it admits.
constexpr std::string_view kPeerLinkDomain = "kvstore-pair";
constexpr std::string_view kKvstoreIdentityPrefix = "kvstore/";
// Uuids of mirrored updates remembered, so that a client's KVSET that reaches the passive after the
// active's KVPUB of it is not held (and applied again, stale, at a failover).
constexpr std::size_t kMirroredUuids = 65536;

struct Entry {
  std::shared_ptr<const KvMsg> msg;  // shared with the snapshot replies that still have to send it
  std::optional<Clock::time_point> expires;
  detail::MapUsage::Held held;  // who is charged for it; the server's own status is charged to nobody
  std::string writer;           // the authenticated identity that wrote it last ("" without CURVE)
};

// The map as the stack's policy reads it.
class MapView final : public StoreView {
 public:
  explicit MapView(const std::map<std::string, Entry>& map) : map_(map) {}

  std::optional<Value> find(const std::string& key) const override {
    const auto found = map_.find(key);
    if (found == map_.end()) return std::nullopt;
    return Value{found->second.msg->body, found->second.writer};
  }

  void visit(const std::string& prefix, const Visit& visit) const override {
    for (auto it = map_.lower_bound(prefix); it != map_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
         ++it) {
      if (!visit(it->first, Value{it->second.msg->body, it->second.writer})) return;
    }
  }

 private:
  const std::map<std::string, Entry>& map_;
};

// The account the stack's own records (StackPolicy::reserved) are charged to: no writer can take
// their room from the others.
const std::string kStackRoom = "the stack's records";

// Bytes a key takes in the map for the limits: key, properties and body.
std::size_t footprint(const KvMsg& msg) {
  std::size_t bytes = msg.key.size() + msg.body.size();
  for (const auto& [name, value] : msg.properties) bytes += name.size() + value.size() + 2;
  return bytes;
}

// The identity the ZAP handler gave the sender's key ("<role>/<name>"), or "" without CURVE.
std::string user_id(zmq::message_t& frame) {
  const char* identity = zmq_msg_gets(frame.handle(), "User-Id");
  return identity != nullptr ? std::string(identity) : std::string();
}

// The network address of a message's sender, as libzmq saw the connection.
std::string peer_address(zmq::message_t& frame) {
  const char* address = zmq_msg_gets(frame.handle(), "Peer-Address");
  return address != nullptr ? std::string(address) : std::string("unknown");
}

// The peer link's listener (P + 3): the kvstore key pair, admitting the kvstore role's key alone, in
// a ZAP domain of its own so that no client role's key can hear the pair's states or feed them.
security::CurveServer peer_link_curve(const security::CurveServer& curve) {
  security::CurveServer link{curve.public_key, curve.secret_key, std::string(kPeerLinkDomain), {}};
  for (const auto& [key, identity] : curve.peers) {
    if (identity.compare(0, kKvstoreIdentityPrefix.size(), kKvstoreIdentityPrefix) == 0) link.peers.emplace(key, identity);
  }
  return link;
}

// This server as a CURVE client of its peer (the peer link's SUB, the passive's mirror): both servers
// of a pair hold the one kvstore key pair, so the peer's public key is this server's own.
security::CurveClient peer_client_curve(const security::CurveServer& curve) {
  return security::CurveClient{curve.public_key, curve.secret_key, curve.public_key};
}

// Who sent a message: its ZAP identity ("" without CURVE) and its network address.
struct Sender {
  std::string identity;
  std::string address;
};

Sender sender_of(zmq::message_t& frame) { return Sender{user_id(frame), peer_address(frame)}; }

void check_options(const ServerOptions& o) {
  if (o.bind_host.empty()) {
    throw KvstoreError("kvstore server: no interface to bind (bind_host is empty; set [kvstore] bind_host)");
  }
  if (o.port == 0 || o.port > 65533) {
    throw KvstoreError("kvstore server: port " + std::to_string(o.port) +
                       " out of range; the server uses P, P + 1 and P + 2, so P must be from 1 to 65533 "
                       "([kvstore] port)");
  }
  if (o.heartbeat_ms == 0) {
    throw KvstoreError("kvstore server: heartbeat of 0 ms; expected at least 1 ms ([kvstore] heartbeat_ms)");
  }
  const auto positive = [](std::size_t value, const char* name) {
    if (value == 0) {
      throw KvstoreError(std::string("kvstore server: ") + name + " is 0; expected at least 1 ([kvstore] " + name +
                         ")");
    }
  };
  positive(o.max_keys, "max_keys");
  positive(o.max_map_bytes, "max_map_bytes");
  positive(o.max_keys_per_address, "max_keys_per_address");
  positive(o.max_map_bytes_per_address, "max_map_bytes_per_address");
  positive(o.max_stack_keys, "max_stack_keys");
  positive(o.max_stack_bytes, "max_stack_bytes");
  positive(o.scans_kept, "scans_kept");
  if (o.max_value_bytes < kMaxKeyBytes || o.max_value_bytes > (std::size_t{1} << 30)) {
    throw KvstoreError("kvstore server: max_value_bytes " + std::to_string(o.max_value_bytes) + " out of range; " +
                       "expected " + std::to_string(kMaxKeyBytes) + " to 2^30 ([kvstore] max_value_bytes)");
  }
  if (o.pair.role != PairRole::kNone) {
    if (o.port > 65532) {
      throw KvstoreError("kvstore server: port " + std::to_string(o.port) +
                         " out of range for a pair, whose servers also use P + 3 (the peer link): at most 65532");
    }
    if (o.pair.peer_host.empty() || o.pair.peer_port == 0 || o.pair.peer_port > 65532) {
      throw KvstoreError("kvstore server: the pair's peer '" + o.pair.peer_host + ":" + std::to_string(o.pair.peer_port) +
                         "' is not host:port with a port from 1 to 65532 ([kvstore] servers)");
    }
    if (o.curve.enabled() && peer_link_curve(o.curve).peers.empty()) {
      throw KvstoreError("kvstore server: a pair with [security] on admits its peer by the kvstore role's public "
                         "key, which its allowlist lacks (both servers hold the one pair of <key_dir>/kvstore/)");
    }
  }
  if (o.curve.enabled() && o.producer_threads.empty()) {
    throw KvstoreError("kvstore server: [security] on with no receivers' threads (producer_threads): the server "
                       "takes a producer's status only for a thread of [[receivers]], which it must be given");
  }
  if (!(o.max_ttl_s > 0.0) || !(o.max_ttl_s <= kTtlCeilingS)) {
    throw KvstoreError("kvstore server: max_ttl_s " + std::to_string(o.max_ttl_s) + " out of range; expected more " +
                       "than 0 and at most 1e9 seconds ([kvstore] max_ttl_s)");
  }
}

}  // namespace

std::uint64_t ServerStats::refusals(const std::string& kind) const {
  const std::map<std::string, std::uint64_t> counters{
      {"malformed", malformed},     {"oversized", oversized},     {"refused_quota", refused_quota},
      {"refused_full", refused_full}, {"ttl_clamped", ttl_clamped}, {"snapshots_dropped", snapshots_dropped},
      {"errors", errors}, {"unauthenticated", unauthenticated}, {"unauthorised", unauthorised},
      {"refused_fold", refused_fold}};
  const auto found = counters.find(kind);
  if (found == counters.end()) throw KvstoreError("kvstore server: no refusal counter named '" + kind + "'");
  return found->second;
}

struct Server::Impl {
  Impl(ServerOptions opts, std::unique_ptr<const StackPolicy> stack_policy)
      : options(std::move(opts)),
        policy(std::move(stack_policy)),
        usage({options.max_keys, options.max_map_bytes, options.max_keys_per_address,
               options.max_map_bytes_per_address}),
        stack_usage({options.max_stack_keys, options.max_stack_bytes, options.max_stack_keys,
                    options.max_stack_bytes}),
        replies(snapshot, kMaxWaitingSnapshots, std::chrono::milliseconds(options.heartbeat_ms) * kStalledHeartbeats,
                [this](const std::string& why) { refuse(&ServerStats::snapshots_dropped, "snapshots_dropped", why); }) {}

  ServerOptions options;
  std::unique_ptr<const StackPolicy> policy;
  zmq::context_t context{1};
  // Before the sockets bind: without a handler libzmq lets every CURVE peer in.
  std::optional<security::ZapHandler> zap;
  zmq::socket_t snapshot{context, zmq::socket_type::router};
  zmq::socket_t publisher{context, zmq::socket_type::pub};
  zmq::socket_t collector{context, zmq::socket_type::sub};
  Wakeup wakeup;
  std::atomic<bool> stop_requested{false};
  std::atomic<protocol::ServiceState> state{protocol::ServiceState::kIdle};  // set by the daemon

  std::map<std::string, Entry> map;
  std::multimap<Clock::time_point, std::string> expiries;  // entries whose key was set again are skipped
  std::int64_t sequence = 0;
  std::string own_status_key = protocol::status_key(protocol::kServiceKvstore, options.status_name);
  MapView view{map};
  detail::MapUsage usage;       // every key but the stack's records, charged to its writer
  detail::MapUsage stack_usage;  // the stack's own records, in a room of their own charged to kStackRoom
  // The groups (StackPolicy::group_of) that hold records, by the sequence of their first record:
  // the oldest goes first when the room is full.
  std::map<std::string, std::int64_t> group_born;
  std::set<std::pair<std::int64_t, std::string>> groups_by_age;
  // The folded groups, by the sequence of their fold: past scans_kept the oldest goes.
  std::map<std::string, std::int64_t> fold_born;
  std::set<std::pair<std::int64_t, std::string>> folds_by_age;
  detail::SnapshotReplies replies;
  std::vector<zmq::message_t> parts;  // the frames of the message being handled

  mutable std::mutex stats_mutex;
  ServerStats stats;
  std::optional<protocol::ServiceStatus> published_status;  // without its time stamp
  std::optional<RecordLog> log;  // with a log_dir: the durable records
  std::string stack_id;          // kept in the log_dir, or new at every start without one

  // The pair (kvstore/SPEC.md, "The pair"); none of it for a single server.
  std::optional<PairMachine> machine;
  std::optional<zmq::socket_t> pair_pub;  // P + 3: this server's state, every heartbeat
  std::optional<zmq::socket_t> pair_sub;  // the peer's P + 3
  std::optional<PairState> peer_heard;    // the state the peer said last
  // The passive's mirror of the active: a SUB to its P + 1 and a DEALER to its P, as a client.
  enum class Mirror { kOff, kConnecting, kSyncing, kMirroring };
  Mirror mirror = Mirror::kOff;
  std::optional<zmq::socket_t> mirror_sub;
  std::optional<zmq::socket_t> mirror_dealer;
  Clock::time_point mirror_since;
  std::vector<KvMsg> mirror_snapshot;  // the KVSYNCs of the snapshot under way
  std::vector<KvMsg> mirror_buffer;    // the KVPUBs that came while it was under way
  std::vector<zmq::message_t> mirror_parts;
  // Clients' writes held while not active, oldest first, and by uuid.
  struct Pending {
    std::vector<zmq::message_t> parts;
    std::string uuid;
    Clock::time_point received;
    std::size_t bytes;
    Sender sender;  // judged as this writer when applied, as a single server judges it on arrival
  };
  std::size_t pending_bytes = 0;
  std::list<Pending> pending;
  std::unordered_map<std::string, std::list<Pending>::iterator> pending_by_uuid;
  std::deque<std::string> mirrored_order;
  std::unordered_set<std::string> mirrored_uuids;
  std::vector<std::string> pair_events;  // for the daemon's log (take_pair_events)
  bool peer_silent = false;              // as last logged
  Clock::time_point peer_link_since;     // when pair_sub last connected, or last heard a state

  // Whether this server serves: a single server always, one of a pair while active.
  bool serving() const { return !machine || machine->active(); }

  // Whether a snapshot request's sender counts in the pair's vote: without [security] anyone (the
  // network is trusted), with it whom the stack's policy names. `frame` is one the peer sent: a
  // ROUTER's routing id frame carries no metadata.
  bool votes(zmq::message_t& frame) const {
    return !options.curve.enabled() || policy->votes(user_id(frame));
  }

  std::string endpoint(int offset) const {
    return "tcp://" + options.bind_host + ":" + std::to_string(options.port + offset);
  }

  void bind(zmq::socket_t& socket, int offset, const std::string& role) {
    const std::string address = endpoint(offset);
    try {
      socket.bind(address);
    } catch (const zmq::error_t& error) {
      throw KvstoreError("kvstore server: cannot bind the " + role + " socket to " + address + ": " + error.what() +
                         " (stop the program holding that port, or choose another kvstore port)");
    }
  }

  void count(const std::function<void(ServerStats&)>& change) {
    const std::lock_guard<std::mutex> lock(stats_mutex);
    change(stats);
    stats.sequence = sequence;
    stats.keys = map.size();
    stats.map_bytes = usage.bytes() + stack_usage.bytes();
  }

  // Counts one refusal of `kind` in `counter`, keeping the text of the first of its kind.
  void refuse(std::uint64_t ServerStats::*counter, const char* kind, const std::string& why) {
    count([&](ServerStats& s) {
      ++(s.*counter);
      s.first_refusals.try_emplace(kind, why);
    });
  }

  void reject(const std::string& why) {
    count([&why](ServerStats& s) {
      ++s.malformed;
      s.last_malformed = why;
      s.first_refusals.try_emplace("malformed", why);
    });
  }

  // Runs the handling of one message (or one timer); what it throws is counted, and the loop goes on.
  void guarded(const char* what, const std::function<void()>& handle) {
    try {
      handle();
    } catch (const std::exception& error) {
      refuse(&ServerStats::errors, "errors", std::string(what) + ": " + error.what());
    }
  }

  // Publishes an update with the next sequence, after appending it to the log (deadline_ms: when
  // a set expires, Unix ms, 0 never; writer and account: who wrote it and who it is charged to).
  void publish(KvMsg& msg, std::int64_t deadline_ms = 0, const std::string& writer = {},
               const std::string& account = {}) {
    msg.sequence = ++sequence;
    if (log && log->open()) {
      LogRecord record;
      record.kind = msg.is_delete() ? LogRecord::Kind::kDelete : LogRecord::Kind::kSet;
      record.sequence = msg.sequence;
      record.key = msg.key;
      if (!msg.is_delete()) {
        record.deadline_ms = deadline_ms;
        record.uuid = msg.uuid;
        record.properties = encode_properties(msg.properties);
        record.body = msg.body;
        record.writer = writer;
        record.account = account;
      }
      try {
        log->append(record);
        count([this](ServerStats& s) { s.log_bytes = log->log_bytes(); });
      } catch (const KvstoreError& error) {
        log_failed(error.what());
      }
    }
    send_kvmsg(publisher, msg);
  }

  void log_failed(const std::string& why) {
    count([&why](ServerStats& s) {
      ++s.log_write_errors;
      s.log_failing = true;
      s.log_error = why;
    });
  }

  // Applies one record of the log at start: the map becomes what it was when the record was written.
  void restore(LogRecord&& record) {
    sequence = std::max(sequence, record.sequence);
    if (record.key == own_status_key) return;  // the server writes its status anew
    const auto existing = map.find(record.key);
    if (record.kind == LogRecord::Kind::kDelete) {
      if (existing != map.end()) drop(existing);
      return;
    }
    KvMsg msg;
    msg.key = record.key;
    msg.sequence = record.sequence;
    msg.uuid = std::move(record.uuid);
    msg.properties = decode_properties(record.properties);
    msg.body = std::move(record.body);
    std::optional<Clock::time_point> expires;
    if (record.deadline_ms > 0) {
      // What is left of its ttl; a deadline passed while the server was down expires at the first turn.
      const double left_s = std::clamp(static_cast<double>(record.deadline_ms - wall_ms()) / 1000.0, 0.0,
                                       options.max_ttl_s);
      expires = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(left_s));
    }
    const bool stack = policy->reserved(msg.key);
    const detail::MapUsage::Held held{stack ? kStackRoom : record.account, footprint(msg)};
    if (existing != map.end()) forget_expiry(existing);
    (stack ? stack_usage : usage).charge(held, existing != map.end() ? &existing->second.held : nullptr);
    if (expires) expiries.emplace(*expires, msg.key);
    if (const std::string group = policy->group_of(msg.key); !group.empty()) {
      const auto [born, added] = group_born.emplace(group, record.sequence);
      if (!added && record.sequence < born->second) {
        groups_by_age.erase({born->second, group});
        born->second = record.sequence;
      }
      groups_by_age.emplace(born->second, group);
      if (msg.key == policy->fold_key(group)) note_fold(group, record.sequence);
    }
    std::string key = msg.key;
    map[std::move(key)] = Entry{std::make_shared<const KvMsg>(std::move(msg)), expires, held, record.writer};
  }

  // Writes the live map as a new snapshot and begins a new log; a failure is counted, not thrown.
  bool compact() {
    try {
      const auto now_steady = Clock::now();
      const std::int64_t now_wall = wall_ms();
      log->compact(sequence, [&](const RecordLog::Sink& sink) {
        for (const auto& [key, entry] : map) {
          if (key == own_status_key) continue;
          LogRecord record;
          record.kind = LogRecord::Kind::kSet;
          record.sequence = entry.msg->sequence;
          record.key = key;
          record.uuid = entry.msg->uuid;
          record.properties = encode_properties(entry.msg->properties);
          record.body = entry.msg->body;
          record.writer = entry.writer;
          record.account = entry.held.address;
          if (entry.expires) {
            record.deadline_ms =
                std::max<std::int64_t>(1, now_wall + std::chrono::ceil<std::chrono::milliseconds>(
                                                         std::max(*entry.expires - now_steady, Clock::duration{}))
                                                         .count());
          }
          sink(record);
        }
      });
    } catch (const KvstoreError& error) {
      log_failed(error.what());
      return false;
    }
    count([this](ServerStats& s) {
      ++s.log_compactions;
      s.log_failing = false;
      s.log_bytes = log->log_bytes();
    });
    return true;
  }

  // Between turns of the loop: syncs the log as its policy says, compacts it when it passed its
  // bound, and after a failure tries a compaction at every heartbeat (`heartbeat`).
  void tend_log(Clock::time_point now, bool heartbeat) {
    if (!log) return;
    if (!log->open()) {
      if (heartbeat) compact();
      return;
    }
    try {
      log->sync(now);
    } catch (const KvstoreError& error) {
      log_failed(error.what());
      return;
    }
    if (log->compaction_due()) compact();
  }

  void handle_snapshot_request() {
    const std::size_t frames = recv_frames(snapshot, parts, 4);
    if (frames == 0) return;
    const std::vector<std::string_view> views = frame_views(parts);
    if (frames != 3 || views[1] != kSnapshotRequest) {
      reject("snapshot request: expected the 2 frames 'ICANHAZ?' and a subtree, got " + std::to_string(frames - 1) +
             " frames" + (frames > 1 ? " starting with '" + std::string(views[1].substr(0, 20)) + "'" : ""));
      return;
    }
    if (views[2].size() > kMaxKeyBytes) {
      reject("snapshot request: subtree of " + std::to_string(views[2].size()) + " bytes, a key prefix has at most " +
             std::to_string(kMaxKeyBytes));
      return;
    }
    // Copied: becoming active below applies the pending writes through `parts`, which views point into.
    std::string identity(views[0]);
    const std::string subtree(views[2]);
    if (machine) {
      // The Binary Star vote: a passive serves only when its active is silent and a client asks. Only a
      // client that could write votes: a viewer's key (every screen holds one) could otherwise make a
      // second active beside a live one whose peer link alone was cut.
      if (!serving() && !votes(parts[1])) {
        count([](ServerStats& st) { ++st.snapshots_refused; });
        return;
      }
      const PairMachine::Outcome outcome = machine->on_request(Clock::now());
      on_outcome(outcome);
      if (!outcome.serve) {
        count([](ServerStats& st) { ++st.snapshots_refused; });
        return;
      }
    }
    std::vector<std::shared_ptr<const KvMsg>> entries;
    // Every snapshot carries the server's status, whatever its subtree: its stack_id is how each
    // client learns, at every sync, which stack it joined (stack_id.hpp).
    if (own_status_key.compare(0, subtree.size(), subtree) != 0) {
      if (const auto own = map.find(own_status_key); own != map.end()) entries.push_back(own->second.msg);
    }
    for (auto it = map.lower_bound(subtree); it != map.end() && it->first.compare(0, subtree.size(), subtree) == 0;
         ++it) {
      entries.push_back(it->second.msg);
    }
    KvMsg end;
    end.key = std::string(kSnapshotEnd);
    end.sequence = sequence;
    end.body = subtree;
    if (replies.answer(std::move(identity), std::move(entries), std::move(end), Clock::now())) {
      count([](ServerStats& s) { ++s.snapshots; });
    }
  }

  void handle_update() {
    const std::size_t frames = recv_frames(collector, parts, kKvmsgFrames + 1);
    if (frames == 0) return;
    if (!serving() && frames == kKvmsgFrames) {
      hold();
      return;
    }
    apply_update(frames);
  }

  // Not active: keeps a client's write until the active's KVPUB of its uuid comes, or this server
  // becomes active (kvstore/SPEC.md, "The pair"). A message that is no kvmsg is judged when applied.
  void hold() {
    Sender sender = sender_of(parts[0]);
    std::string uuid(frame_views(parts)[kFrameUuid]);
    if (!uuid.empty() && mirrored_uuids.count(uuid) != 0) return;  // the active published it already
    std::size_t bytes = 0;
    for (const zmq::message_t& part : parts) bytes += part.size();
    // Bounded in writes and in bytes (max_map_bytes: what the map itself may hold).
    while (!pending.empty() && (pending.size() >= kMaxPending || pending_bytes + bytes > options.max_map_bytes)) {
      drop_pending_front();
      const bool first = stats.pending_lost == 0;
      count([](ServerStats& st) { ++st.pending_lost; });
      if (first) {
        note_pair_event("pending writes past " + std::to_string(kMaxPending) + " or max_map_bytes" +
                        ": the oldest are dropped (pending_lost), lost if the active never published them");
      }
    }
    pending_bytes += bytes;
    pending.push_back(Pending{std::move(parts), uuid, Clock::now(), bytes, std::move(sender)});
    parts.clear();
    if (!uuid.empty()) {
      if (const auto old = pending_by_uuid.find(uuid); old != pending_by_uuid.end()) {
        pending_bytes -= old->second->bytes;
        pending.erase(old->second);
      }
      pending_by_uuid[uuid] = std::prev(pending.end());
    }
    count([this](ServerStats& st) { st.pending = pending.size(); });
  }

  void drop_pending_front() {
    const Pending& oldest = pending.front();
    if (!oldest.uuid.empty()) pending_by_uuid.erase(oldest.uuid);
    pending_bytes -= oldest.bytes;
    pending.pop_front();
  }

  void note_pair_event(std::string line) {
    const std::lock_guard<std::mutex> lock(stats_mutex);
    if (pair_events.size() < 1000) pair_events.push_back(std::move(line));
  }

  // Applies the write in `parts` (`frames` of them) as a single server does, as written by `pending_sender`
  // (a held write's) or else by the sender of `parts`.
  void apply_update(std::size_t frames, const Sender* pending_sender = nullptr) {
    if (frames != kKvmsgFrames) {
      reject("update: kvmsg of " + std::to_string(frames) + " frames, expected " + std::to_string(kKvmsgFrames) +
             " (key, sequence, uuid, properties, body)");
      return;
    }
    KvMsg msg;
    double ttl_s = 0.0;
    try {
      msg = decode_kvmsg(frame_views(parts));
      check_key(msg.key);
      ttl_s = msg.ttl_s();
    } catch (const KvstoreError& error) {
      reject(std::string("update: ") + error.what());
      return;
    }
    if (msg.key == own_status_key) {
      reject("update: kvmsg '" + msg.key + "': this key belongs to the server, which publishes its status there");
      return;
    }
    const Sender sender = pending_sender != nullptr ? *pending_sender : sender_of(parts[0]);
    const std::string& address = sender.address;
    const std::string& identity = sender.identity;
    // Only the server says who wrote: with CURVE the KVPUB names the writer's identity, which a
    // pair's passive takes as the key's holder.
    msg.properties.erase(std::string(kWriterProperty));
    if (options.curve.enabled() && !identity.empty()) {
      msg.properties[std::string(kWriterProperty)] = identity;
      if (encode_properties(msg.properties).size() > kMaxPropertiesBytes) {
        reject("update: kvmsg '" + msg.key + "': properties leave no room for the writer's identity within " +
               std::to_string(kMaxPropertiesBytes) + " bytes");
        return;
      }
    }
    if (const std::string why = policy->server_only(msg.key); !why.empty()) {
      refuse(&ServerStats::refused_fold, "refused_fold",
             "update from " + address + (identity.empty() ? "" : " (" + identity + ")") + ": kvmsg '" + msg.key +
                 "' refused: " + why);
      return;
    }
    const std::string group = policy->group_of(msg.key);
    const auto held_entry = map.find(msg.key);
    if (options.curve.enabled()) {
      const std::string& holder = held_entry != map.end() ? held_entry->second.writer : std::string();
      const std::string why = policy->write_refusal(identity, msg.key, holder, msg.is_delete(), view);
      if (!why.empty()) {
        refuse(&ServerStats::unauthorised, "unauthorised",
               "update from " + address + ": kvmsg '" + msg.key + "' refused: " + why);
        return;
      }
    }
    const bool create = msg.properties.erase(std::string(kCreateProperty)) > 0;
    if (msg.is_delete()) {
      handle_deletion(msg);
      return;
    }
    if (create && (held_entry != map.end() || policy->folded(msg.key, view))) {
      count([](ServerStats& s) { ++s.creates_refused; });
      return;
    }
    if (msg.body.size() > options.max_value_bytes) {
      refuse(&ServerStats::oversized, "oversized",
             "update from " + address + ": kvmsg '" + msg.key + "': value of " + std::to_string(msg.body.size()) +
                 " bytes, at most " + std::to_string(options.max_value_bytes) + " ([kvstore] max_value_bytes)");
      return;
    }
    try {
      check_msgpack(msg.body);
    } catch (const KvstoreError& error) {
      reject("update: kvmsg '" + msg.key + "': " + error.what());
      return;
    }
    if (ttl_s > options.max_ttl_s) {
      refuse(&ServerStats::ttl_clamped, "ttl_clamped",
             "update from " + address + ": kvmsg '" + msg.key + "': ttl " + msg.properties.at(std::string(kTtlProperty)) +
                 " s clamped to " + std::to_string(options.max_ttl_s) + " s ([kvstore] max_ttl_s)");
      ttl_s = options.max_ttl_s;
      msg.set_ttl_s(ttl_s);
    }
    // With CURVE a writer is its identity: the services of one host share an address, not a key.
    const bool stack = policy->reserved(msg.key);
    const std::string account = stack ? kStackRoom : (identity.empty() ? address : identity);
    detail::MapUsage& room = stack ? stack_usage : usage;
    const detail::MapUsage::Held held{account, footprint(msg)};
    const auto existing = map.find(msg.key);
    const detail::MapUsage::Held* old = existing != map.end() ? &existing->second.held : nullptr;
    detail::MapUsage::Verdict verdict = room.check(account, held.bytes, old);
    while (stack && verdict != detail::MapUsage::Verdict::kAccepted && evict_oldest_group_but(group)) {
      verdict = room.check(account, held.bytes, old);
    }
    if (verdict != detail::MapUsage::Verdict::kAccepted) {
      const std::string why = "update from " + address + ": kvmsg '" + msg.key + "' refused: kvstore full: " +
                              (stack ? std::string("the stack's records fill their room with no older scan left "
                                                   "to erase ([kvstore] max_stack_keys, max_stack_bytes)")
                                     : room.why(verdict, account));
      if (verdict == detail::MapUsage::Verdict::kOverQuota && !stack) {
        refuse(&ServerStats::refused_quota, "refused_quota", why);
      } else {
        refuse(&ServerStats::refused_full, "refused_full", why);
        if (stack) count([](ServerStats& s) { ++s.refused_stack; });
      }
      return;
    }
    const std::size_t body_bytes = msg.body.size();
    if (existing != map.end()) forget_expiry(existing);
    std::optional<Clock::time_point> expires;
    std::int64_t deadline_ms = 0;
    if (ttl_s > 0.0) {
      // ttl_s <= max_ttl_s <= kTtlCeilingS: the conversion cannot overflow.
      expires = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ttl_s));
      expiries.emplace(*expires, msg.key);
      deadline_ms = wall_ms() + static_cast<std::int64_t>(std::ceil(ttl_s * 1000.0));
    }
    publish(msg, deadline_ms, identity, account);
    room.charge(held, old);
    if (!group.empty() && group_born.emplace(group, sequence).second) groups_by_age.emplace(sequence, group);
    std::string key = msg.key;  // not map[msg.key] = ...move(msg): the right side is evaluated first
    map[std::move(key)] = Entry{std::make_shared<const KvMsg>(std::move(msg)), expires, held, identity};
    count([body_bytes](ServerStats& s) {
      ++s.updates;
      s.bytes += body_bytes;
    });
    if (!group.empty()) guarded("fold", [this, &group] { maybe_fold(group); });
  }

  // ---- The pair (kvstore/SPEC.md, "The pair") ----

  std::string peer_endpoint(int offset) const {
    return "tcp://" + options.pair.peer_host + ":" + std::to_string(options.pair.peer_port + offset);
  }

  Clock::duration heartbeat_period() const { return std::chrono::milliseconds(options.heartbeat_ms); }

  void send_pair_state() {
    const std::string_view pair_state = name(machine->state());
    pair_pub->send(zmq::buffer(pair_state.data(), pair_state.size()), zmq::send_flags::dontwait);
  }

  // Does what one outcome of the machine says: a change of state is logged and acted on.
  void on_outcome(const PairMachine::Outcome& outcome) {
    if (!outcome.changed()) return;
    note_pair_event("pair: " + std::string(name(outcome.before)) + " -> " + std::string(name(outcome.after)) + " on " +
                    std::string(name(outcome.event)) + (outcome.why.empty() ? "" : ": " + std::string(outcome.why)));
    count([&outcome](ServerStats& st) {
      st.pair_state = std::string(name(outcome.after));
      if (outcome.before == PairState::kPassive && outcome.after == PairState::kActive &&
          outcome.event == PairEvent::kRequestPeerSilent) {
        ++st.failovers;
      }
      if (outcome.before == PairState::kActive && outcome.after == PairState::kPassive) ++st.splits;
    });
    if (outcome.after == PairState::kActive) {
      stop_mirror();
      apply_pending();
      guarded("grace", [this] { grant_grace(); });
      published_status.reset();  // says at once that this server is the active
      guarded("status", [this] { publish_status(); });
    } else if (outcome.after == PairState::kPassive) {
      start_mirror();
    }
    send_pair_state();
  }

  void handle_peer_state() {
    zmq::message_t frame;
    if (!pair_sub->recv(frame, zmq::recv_flags::dontwait)) return;
    const bool one_frame = !frame.more();
    for (bool more = frame.more(); more;) {  // drained, so the next message starts clean
      zmq::message_t rest;
      if (!pair_sub->recv(rest, zmq::recv_flags::dontwait)) break;
      more = rest.more();
    }
    const std::optional<PairState> peer = one_frame ? parse_pair_state(frame.to_string_view()) : std::nullopt;
    if (!peer) {
      reject("peer link: expected a pair state (primary, backup, active, passive), got " +
             std::to_string(frame.size()) + " bytes");
      return;
    }
    peer_heard = *peer;
    peer_link_since = Clock::now();
    on_outcome(machine->on_peer(*peer, Clock::now()));
  }

  // A new SUB to the peer's P + 3. libzmq gives up a connection whose handshake failed (a fake
  // peer, a key not yet in place, a peer briefly without [security]), so a link silent for
  // kStalledHeartbeats heartbeats is connected anew: the real peer is heard once it is back.
  void connect_peer_link(Clock::time_point now) {
    pair_sub.emplace(context, zmq::socket_type::sub);
    pair_sub->set(zmq::sockopt::linger, 0);
    pair_sub->set(zmq::sockopt::maxmsgsize, options.curve.enabled() ? kPeerLinkCurveFrameBytes : kPeerLinkFrameBytes);
    pair_sub->set(zmq::sockopt::subscribe, "");
    security::apply(*pair_sub, peer_client_curve(options.curve));  // nothing without [security]
    pair_sub->connect(peer_endpoint(3));
    peer_link_since = now;
  }

  void tend_peer_link(Clock::time_point now) {
    if (now - peer_link_since > heartbeat_period() * kStalledHeartbeats) connect_peer_link(now);
  }

  // The state the peer said last, or "silent" when it said nothing within the silence period.
  std::string peer_state_text(Clock::time_point now) const {
    if (!peer_heard) return machine->peer_alive(now) ? std::string() : std::string("silent");
    return machine->peer_alive(now) ? std::string(name(*peer_heard)) : std::string("silent");
  }

  // Becoming passive: new sockets to the active, and a full snapshot once the SUB hears it.
  void start_mirror() {
    stop_mirror();
    mirror_sub.emplace(context, zmq::socket_type::sub);
    mirror_dealer.emplace(context, zmq::socket_type::dealer);
    const std::int64_t max_frame = max_frame_bytes(options.max_value_bytes);
    for (zmq::socket_t* socket : {&*mirror_sub, &*mirror_dealer}) {
      socket->set(zmq::sockopt::linger, 0);
      socket->set(zmq::sockopt::maxmsgsize, max_frame);
    }
    for (zmq::socket_t* socket : {&*mirror_sub, &*mirror_dealer}) {
      security::apply(*socket, peer_client_curve(options.curve));  // nothing without [security]
    }
    mirror_sub->set(zmq::sockopt::rcvhwm, kPublisherHwm);
    mirror_sub->set(zmq::sockopt::subscribe, "");
    mirror_sub->connect(peer_endpoint(1));
    mirror_dealer->connect(peer_endpoint(0));
    mirror = Mirror::kConnecting;
    mirror_since = Clock::now();
  }

  void stop_mirror() {
    mirror_sub.reset();
    mirror_dealer.reset();
    mirror_snapshot.clear();
    mirror_buffer.clear();
    mirror = Mirror::kOff;
  }

  void ask_snapshot() {
    mirror_dealer->send(zmq::buffer(kSnapshotRequest), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    mirror_dealer->send(zmq::message_t(), zmq::send_flags::dontwait);
    mirror_snapshot.clear();
    mirror_buffer.clear();
    mirror = Mirror::kSyncing;
    mirror_since = Clock::now();
  }

  // A snapshot that does not end within kStalledHeartbeats heartbeats (the active died or yielded
  // mid-reply) is asked for again on new sockets.
  // So is a mirror that heard nothing for as long: a failed CURVE handshake (a wrong key, the
  // peer's or this server's) is a protocol error, after which libzmq never reconnects that socket.
  void tend_mirror(Clock::time_point now) {
    if ((mirror == Mirror::kSyncing || mirror == Mirror::kConnecting) &&
        now - mirror_since > heartbeat_period() * kStalledHeartbeats) {
      start_mirror();
    }
  }

  std::optional<KvMsg> read_mirror(zmq::socket_t& socket) {
    const std::size_t frames = recv_frames(socket, mirror_parts, kKvmsgFrames + 1);
    if (frames == 0) return std::nullopt;
    if (frames != kKvmsgFrames) {
      reject("mirror: kvmsg of " + std::to_string(frames) + " frames from the active, expected " +
             std::to_string(kKvmsgFrames));
      return std::nullopt;
    }
    try {
      return decode_kvmsg(frame_views(mirror_parts));
    } catch (const KvstoreError& error) {
      reject(std::string("mirror: ") + error.what());
      return std::nullopt;
    }
  }

  // A KVPUB or HUGZ of the active.
  void handle_mirror_update() {
    std::optional<KvMsg> msg = read_mirror(*mirror_sub);
    if (!msg) return;
    if (mirror == Mirror::kConnecting) {
      ask_snapshot();  // the subscription is live: nothing published from now on is missed
      if (msg->key == kHeartbeat) return;
    }
    if (msg->key == kHeartbeat) {
      if (mirror == Mirror::kMirroring && msg->sequence != sequence) {
        // Updates missed (a full pipe) or the active restarted: the whole map again.
        note_pair_event("mirror: the active's heartbeat says sequence " + std::to_string(msg->sequence) +
                        ", this server holds " + std::to_string(sequence) + ": taking a new snapshot");
        ask_snapshot();
      }
      age_pending(Clock::now());
      return;
    }
    if (mirror == Mirror::kSyncing) {
      mirror_buffer.push_back(std::move(*msg));
      return;
    }
    if (mirror != Mirror::kMirroring || msg->sequence <= sequence) return;
    if (msg->sequence != sequence + 1) {
      note_pair_event("mirror: update " + std::to_string(msg->sequence) + " after " + std::to_string(sequence) +
                      " (a gap): taking a new snapshot");
      ask_snapshot();
      return;
    }
    apply_mirrored(std::move(*msg));
  }

  // A KVSYNC or the KTHXBAI that ends the snapshot.
  void handle_mirror_snapshot() {
    std::optional<KvMsg> msg = read_mirror(*mirror_dealer);
    if (!msg || mirror != Mirror::kSyncing) return;
    if (msg->key != kSnapshotEnd) {
      mirror_snapshot.push_back(std::move(*msg));
      return;
    }
    // The snapshot replaces the map: what this server held apart from the active is gone.
    clear_map();
    std::string active_stack;
    for (KvMsg& entry : mirror_snapshot) {
      if (entry.key == own_status_key) {
        try {
          active_stack = stack_id_of(protocol::ServiceStatus::decode(entry.body));
        } catch (const std::exception&) {
        }
        continue;
      }
      restore(to_record(std::move(entry)));
    }
    mirror_snapshot.clear();
    sequence = msg->sequence;
    if (!active_stack.empty() && active_stack != stack_id) take_stack_id(active_stack);
    mirror = Mirror::kMirroring;
    if (log) compact();  // the directory now holds what the active holds
    std::vector<KvMsg> buffered = std::move(mirror_buffer);
    mirror_buffer.clear();
    count([](ServerStats& st) { ++st.mirror_syncs; });
    note_pair_event("mirror: snapshot of the active taken at sequence " + std::to_string(sequence) + ", " +
                    std::to_string(map.size()) + " keys");
    for (KvMsg& update : buffered) {
      if (mirror != Mirror::kMirroring) break;
      if (update.sequence <= sequence) continue;
      if (update.sequence != sequence + 1) {
        ask_snapshot();
        break;
      }
      apply_mirrored(std::move(update));
    }
  }

  void take_stack_id(const std::string& id) {
    note_pair_event("stack " + id + ", the active's, replaces " + stack_id + " (the pair shares one stack)");
    stack_id = id;
    if (log) {
      try {
        log->replace_stack_id(id);
      } catch (const KvstoreError& error) {
        log_failed(error.what());
      }
    }
  }

  LogRecord to_record(KvMsg&& msg) const {
    LogRecord record;
    record.kind = msg.is_delete() ? LogRecord::Kind::kDelete : LogRecord::Kind::kSet;
    record.sequence = msg.sequence;
    record.key = std::move(msg.key);
    if (!msg.is_delete()) {
      double ttl_s = 0.0;
      try {
        ttl_s = std::min(msg.ttl_s(), options.max_ttl_s);
      } catch (const KvstoreError&) {
      }
      // The active counts the ttl from its write; the mirror from now, a little later.
      if (ttl_s > 0.0) record.deadline_ms = wall_ms() + static_cast<std::int64_t>(std::ceil(ttl_s * 1000.0));
      // The active's stamp, trusted: the mirror's sockets reach only a holder of the kvstore key.
      if (options.curve.enabled()) {
        if (const auto writer = msg.properties.find(std::string(kWriterProperty)); writer != msg.properties.end()) {
          record.writer = writer->second;
          if (!policy->reserved(record.key)) record.account = record.writer;
        }
      }
      record.uuid = std::move(msg.uuid);
      record.properties = encode_properties(msg.properties);
      record.body = std::move(msg.body);
    }
    return record;
  }

  // One KVPUB of the active, with its sequence: appended to this server's log, applied to its map,
  // and the client's write it publishes no longer pending.
  void apply_mirrored(KvMsg&& msg) {
    std::string uuid = msg.uuid;
    LogRecord record = to_record(std::move(msg));
    if (log && log->open()) {
      try {
        log->append(record);
        count([this](ServerStats& st) { st.log_bytes = log->log_bytes(); });
      } catch (const KvstoreError& error) {
        log_failed(error.what());
      }
    }
    restore(std::move(record));
    if (!uuid.empty()) {
      if (const auto held = pending_by_uuid.find(uuid); held != pending_by_uuid.end()) {
        pending_bytes -= held->second->bytes;
        pending.erase(held->second);
        pending_by_uuid.erase(held);
      }
      if (mirrored_uuids.insert(uuid).second) {
        mirrored_order.push_back(std::move(uuid));
        if (mirrored_order.size() > kMirroredUuids) {
          mirrored_uuids.erase(mirrored_order.front());
          mirrored_order.pop_front();
        }
      }
    }
    count([this](ServerStats& st) {
      ++st.mirrored;
      st.pending = pending.size();
    });
    if (log && log->open() && log->compaction_due()) compact();
  }

  // While the active lives (its heartbeat came), a write it has not published for
  // kPendingHeartbeats heartbeats was refused by it: holding it would apply it at a failover.
  void age_pending(Clock::time_point now) {
    std::uint64_t dropped = 0;
    while (!pending.empty() && now - pending.front().received > heartbeat_period() * kPendingHeartbeats) {
      drop_pending_front();
      ++dropped;
    }
    if (dropped != 0) {
      count([this, dropped](ServerStats& st) {
        st.pending_unmatched += dropped;
        st.pending = pending.size();
      });
    }
  }

  // Becoming active: the writes still held were taken by no active this server mirrored (the dead
  // active took them and never published them, or no active was there); applied in their order.
  void apply_pending() {
    std::list<Pending> held = std::move(pending);
    pending.clear();
    pending_by_uuid.clear();
    pending_bytes = 0;
    std::uint64_t applied = 0;
    for (Pending& write : held) {
      parts = std::move(write.parts);
      guarded("pending update", [this, &write] { apply_update(parts.size(), &write.sender); });
      ++applied;
    }
    parts.clear();
    if (applied != 0) note_pair_event("applied " + std::to_string(applied) + " pending write(s) on becoming active");
    count([applied](ServerStats& st) {
      st.pending_applied += applied;
      st.pending = 0;
    });
  }

  // Becoming active: every key with a ttl lives at least its whole ttl from now. Its holder's
  // refreshes went to a dead active, or reached this server only as the mirror's copy, while its
  // client was still finding the new active; a holder is silent only once it has had a whole ttl to
  // find this server (the aggregator's lease: a takeover needs the holder silent, not a lost echo).
  void grant_grace() {
    const Clock::time_point now = Clock::now();
    std::uint64_t extended = 0;
    for (auto& [key, entry] : map) {
      if (!entry.expires) continue;
      const double ttl_s = std::min(entry.msg->ttl_s(), options.max_ttl_s);
      if (!(ttl_s > 0.0)) continue;
      const Clock::time_point grace =
          now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ttl_s));
      if (*entry.expires >= grace) continue;
      entry.expires = grace;
      expiries.emplace(grace, key);  // the old index entry is skipped as stale by next_expiry
      ++extended;
    }
    if (extended != 0) {
      note_pair_event("gave " + std::to_string(extended) + " key(s) with a ttl their whole ttl from becoming active");
    }
  }

  void clear_map() {
    map.clear();
    expiries.clear();
    usage = detail::MapUsage({options.max_keys, options.max_map_bytes, options.max_keys_per_address,
                              options.max_map_bytes_per_address});
    stack_usage = detail::MapUsage({options.max_stack_keys, options.max_stack_bytes, options.max_stack_keys,
                                    options.max_stack_bytes});
    group_born.clear();
    groups_by_age.clear();
    fold_born.clear();
    folds_by_age.clear();
    published_status.reset();
  }

  // Publishes the deletion of one key and erases it.
  void erase_published(std::map<std::string, Entry>::iterator entry) {
    KvMsg deletion;
    deletion.key = entry->first;
    deletion.uuid = entry->second.msg->uuid;
    publish(deletion);
    drop(entry);
  }

  // Folds `group` when the stack's policy says it is over: its keys become one fold, which the
  // server writes, and their keys are erased (kvstore/SPEC.md, "Folding").
  void maybe_fold(const std::string& group) {
    std::optional<std::string> body = policy->fold(group, view);
    if (!body) return;
    KvMsg msg;
    msg.key = policy->fold_key(group);
    msg.uuid = new_uuid();
    msg.body = std::move(*body);
    if (msg.body.size() > options.max_value_bytes) {
      count([](ServerStats& s) { ++s.folds_too_large; });
      return;  // the parts stay, with their ttl
    }
    const auto existing = map.find(msg.key);
    const detail::MapUsage::Held* old = existing != map.end() ? &existing->second.held : nullptr;
    const detail::MapUsage::Held held{kStackRoom, footprint(msg)};
    // The parts it replaces are bigger than the fold: it fits once they go, so it is charged after
    // them, and written before them so that no reader ever sees the group without both.
    publish(msg, 0, {}, kStackRoom);
    const std::int64_t born = sequence;
    std::string key = msg.key;
    const detail::MapUsage::Held previous = old != nullptr ? *old : detail::MapUsage::Held{};
    if (old != nullptr) stack_usage.release(previous);
    map[key] = Entry{std::make_shared<const KvMsg>(std::move(msg)), std::nullopt, held, {}};
    for (auto it = map.lower_bound(group); it != map.end() && it->first.compare(0, group.size(), group) == 0;) {
      const auto next = std::next(it);
      if (it->first != key) erase_published(it);
      it = next;
    }
    stack_usage.charge(held, nullptr);
    note_fold(group, born);
    count([](ServerStats& s) { ++s.scans_folded; });
    while (folds_by_age.size() > options.scans_kept) drop_oldest_fold(group);
  }

  void note_fold(const std::string& group, std::int64_t born) {
    if (const auto old = fold_born.find(group); old != fold_born.end()) {
      folds_by_age.erase({old->second, group});
    }
    fold_born[group] = born;
    folds_by_age.emplace(born, group);
  }

  void forget_fold(const std::string& group) {
    if (const auto old = fold_born.find(group); old != fold_born.end()) {
      folds_by_age.erase({old->second, group});
      fold_born.erase(old);
    }
  }

  // Erases the group folded longest ago (not `current`, the group just folded), or only its fold
  // when the policy keeps its live keys.
  void drop_oldest_fold(const std::string& current) {
    auto victim = folds_by_age.begin();
    if (victim->second == current) ++victim;
    if (victim == folds_by_age.end()) return;
    const std::string group = victim->second;
    if (policy->keeps_live_keys(group, view)) {
      erase_published(map.find(policy->fold_key(group)));
    } else {
      erase_group(group);
    }
    count([](ServerStats& s) { ++s.summaries_dropped; });
  }

  // Publishes the deletion of every key of `group` and erases it.
  void erase_group(const std::string& group) {
    for (auto it = map.lower_bound(group); it != map.end() && it->first.compare(0, group.size(), group) == 0;
         it = map.lower_bound(group)) {
      erase_published(it);
    }
  }

  // Takes a key's pending expiry out of the index. The index would otherwise keep erased and
  // rewritten scan records until their ttl (a day): memory that grew with every scan.
  void forget_expiry(std::map<std::string, Entry>::const_iterator entry) {
    if (!entry->second.expires) return;
    const auto [first, last] = expiries.equal_range(*entry->second.expires);
    for (auto it = first; it != last; ++it) {
      if (it->second == entry->first) {
        expiries.erase(it);
        return;
      }
    }
  }

  // Erases a key from the map and from its room; a group whose last record goes is forgotten.
  void drop(std::map<std::string, Entry>::iterator entry) {
    forget_expiry(entry);
    const std::string group = policy->group_of(entry->first);
    (policy->reserved(entry->first) ? stack_usage : usage).release(entry->second.held);
    if (!group.empty() && entry->first == policy->fold_key(group)) forget_fold(group);
    map.erase(entry);
    if (group.empty()) return;
    const auto next = map.lower_bound(group);
    if (next != map.end() && next->first.compare(0, group.size(), group) == 0) return;
    if (const auto born = group_born.find(group); born != group_born.end()) {
      groups_by_age.erase({born->second, group});
      group_born.erase(born);
    }
  }

  // Erases every record of the group first written longest ago, other than `keep`, publishing each
  // deletion; false when no other group holds records.
  bool evict_oldest_group_but(const std::string& keep) {
    auto victim = groups_by_age.begin();
    if (victim != groups_by_age.end() && !keep.empty() && victim->second == keep) ++victim;
    if (victim == groups_by_age.end()) return false;
    erase_group(std::string(victim->second));
    count([](ServerStats& s) { ++s.scans_evicted; });
    return true;
  }

  void handle_deletion(KvMsg& msg) {
    if (const auto found = map.find(msg.key); found != map.end()) {
      drop(found);
      publish(msg);
    }
    count([](ServerStats& s) { ++s.updates; });
  }

  void expire(Clock::time_point now) {
    std::uint64_t expired = 0;
    for (auto next = next_expiry(); next && *next <= now; next = next_expiry()) {
      const auto entry = map.find(expiries.begin()->second);
      expiries.erase(expiries.begin());
      KvMsg deletion;
      deletion.key = entry->first;
      deletion.uuid = entry->second.msg->uuid;
      publish(deletion);
      drop(entry);
      ++expired;
    }
    if (expired != 0) count([expired](ServerStats& s) { s.expired += expired; });
  }

  // The earliest expiry of a live entry; drops index entries of keys set again, deleted or expired.
  std::optional<Clock::time_point> next_expiry() {
    while (!expiries.empty()) {
      const auto& [when, key] = *expiries.begin();
      const auto found = map.find(key);
      if (found != map.end() && found->second.expires == when) return when;
      expiries.erase(expiries.begin());
    }
    return std::nullopt;
  }

  // The server's own status, published when a counter changed since the last time.
  void publish_status() {
    ServerStats now = [this] {
      const std::lock_guard<std::mutex> lock(stats_mutex);
      return stats;
    }();
    if (zap) now.unauthenticated = zap->stats().refused;
    protocol::ServiceStatus status;
    status.state = std::string(protocol::to_string(state.load()));
    status.messages = now.updates;
    status.bytes = now.bytes;
    status.extra[std::string(kStackIdField)] = stack_id;
    status.extra["snapshots"] = static_cast<std::int64_t>(now.snapshots);
    status.extra["expired"] = static_cast<std::int64_t>(now.expired);
    status.extra["keys"] = static_cast<std::int64_t>(map.size());
    status.extra["map_bytes"] = static_cast<std::int64_t>(usage.bytes() + stack_usage.bytes());
    status.extra["stack_keys"] = static_cast<std::int64_t>(stack_usage.keys());
    status.extra["scans_evicted"] = static_cast<std::int64_t>(now.scans_evicted);
    status.extra["refused_stack"] = static_cast<std::int64_t>(now.refused_stack);
    status.extra["creates_refused"] = static_cast<std::int64_t>(now.creates_refused);
    status.extra["scans_folded"] = static_cast<std::int64_t>(now.scans_folded);
    status.extra["summaries_dropped"] = static_cast<std::int64_t>(now.summaries_dropped);
    status.extra["scans_summarised"] = static_cast<std::int64_t>(folds_by_age.size());
    status.extra["folds_too_large"] = static_cast<std::int64_t>(now.folds_too_large);
    for (const char* kind : kRefusalKinds) status.extra[kind] = static_cast<std::int64_t>(now.refusals(kind));
    status.extra["log"] = std::string(!log ? "off" : now.log_failing ? "failing: serving from memory" : "on");
    if (log) {
      status.extra["log_fsync"] = std::string(to_string(log->options().fsync));
      status.extra["log_records_loaded"] = static_cast<std::int64_t>(now.log_records_loaded);
      status.extra["log_tails_cut"] = static_cast<std::int64_t>(now.log_tails_cut);
      status.extra["log_bytes_cut"] = static_cast<std::int64_t>(now.log_bytes_cut);
      status.extra["log_compactions"] = static_cast<std::int64_t>(now.log_compactions);
      status.extra["log_write_errors"] = static_cast<std::int64_t>(now.log_write_errors);
      if (!now.log_error.empty()) status.extra["log_error"] = now.log_error;
    }
    if (machine) {
      status.extra["pair"] = std::string(machine->primary() ? "primary" : "backup");
      status.extra["pair_state"] = std::string(name(machine->state()));
      status.extra["peer_state"] = now.peer_state.empty() ? std::string("unheard") : now.peer_state;
      status.extra["peer"] = options.pair.peer_host + ":" + std::to_string(options.pair.peer_port);
      status.extra["failovers"] = static_cast<std::int64_t>(now.failovers);
      status.extra["splits"] = static_cast<std::int64_t>(now.splits);
      status.extra["pending_applied"] = static_cast<std::int64_t>(now.pending_applied);
      status.extra["pending_lost"] = static_cast<std::int64_t>(now.pending_lost);
      status.extra["pending_unmatched"] = static_cast<std::int64_t>(now.pending_unmatched);
      status.extra["snapshots_refused"] = static_cast<std::int64_t>(now.snapshots_refused);
      status.extra["mirrored"] = static_cast<std::int64_t>(now.mirrored);
    }
    if (published_status == status) return;
    published_status = status;
    status.updated_s = protocol::wall_clock_s();
    KvMsg msg;
    msg.key = own_status_key;
    msg.uuid = new_uuid();
    msg.body = status.encode();
    publish(msg);
    map[own_status_key] = Entry{std::make_shared<const KvMsg>(std::move(msg)), std::nullopt, {}, {}};
    count([](ServerStats&) {});
  }

  void heartbeat() {
    KvMsg hugz;
    hugz.key = std::string(kHeartbeat);
    hugz.sequence = sequence;
    if (machine && !serving()) hugz.body = std::string(kPassiveHeartbeat);
    send_kvmsg(publisher, hugz);
  }
};

Server::Server(ServerOptions options) : Server(options, scan_stack_policy(options.producer_threads)) {}

Server::Server(ServerOptions options, std::unique_ptr<const StackPolicy> policy) {
  check_options(options);
  if (!policy) throw KvstoreError("kvstore server: no stack policy (a StackPolicy is required)");
  impl_ = std::make_unique<Impl>(std::move(options), std::move(policy));
  Impl& s = *impl_;
  const std::int64_t max_frame = max_frame_bytes(s.options.max_value_bytes);
  for (zmq::socket_t* socket : {&s.snapshot, &s.publisher, &s.collector}) {
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::maxmsgsize, max_frame);
  }
  s.snapshot.set(zmq::sockopt::sndhwm, kSnapshotHwm);
  s.snapshot.set(zmq::sockopt::router_mandatory, 1);  // a full pipe is EAGAIN, not a silent drop
  s.publisher.set(zmq::sockopt::sndhwm, kPublisherHwm);
  s.collector.set(zmq::sockopt::subscribe, "");
  const bool pair = s.options.pair.role != PairRole::kNone;
  if (pair) {
    const auto silence = std::chrono::milliseconds(s.options.heartbeat_ms) * kPeerSilenceHeartbeats;
    s.machine.emplace(s.options.pair.role == PairRole::kPrimary, silence, Clock::now());
    s.pair_pub.emplace(s.context, zmq::socket_type::pub);
    s.pair_pub->set(zmq::sockopt::linger, 0);
    s.pair_pub->set(zmq::sockopt::maxmsgsize,
                    s.options.curve.enabled() ? kPeerLinkCurveFrameBytes : kPeerLinkFrameBytes);
  }
  if (s.options.curve.enabled()) {
    std::vector<security::CurveServer> listeners{s.options.curve};
    std::vector<zmq::socket_t*> watched{&s.snapshot, &s.publisher, &s.collector};
    if (pair) {
      // The peer link is a CURVE server like the other three (a keyless peer is counted by the same
      // monitors); this server's SUB to its peer is a CURVE client of the one kvstore key
      // (connect_peer_link).
      listeners.push_back(peer_link_curve(s.options.curve));
      watched.push_back(&*s.pair_pub);
    }
    s.zap.emplace(s.context, listeners, watched);
    for (zmq::socket_t* socket : {&s.snapshot, &s.publisher, &s.collector}) security::apply(*socket, s.options.curve);
    if (pair) security::apply(*s.pair_pub, listeners.back());
  }
  s.bind(s.snapshot, 0, "snapshot (ROUTER)");
  s.bind(s.publisher, 1, "publisher (PUB)");
  s.bind(s.collector, 2, "collector (SUB)");
  if (pair) {
    s.bind(*s.pair_pub, 3, "pair state (PUB)");
    s.connect_peer_link(Clock::now());
    s.stats.pair_state = std::string(name(s.machine->state()));
  }
  s.stack_id = new_stack_id();
  if (!s.options.log.dir.empty()) {
    s.log.emplace(s.options.log);
    s.stack_id = s.log->keep_stack_id(s.stack_id);  // a restart with its log is the same stack
    const LogLoad load = s.log->load([&s](LogRecord&& record) { s.restore(std::move(record)); });
    s.sequence = std::max(s.sequence, load.sequence);
    s.count([&load](ServerStats& st) {
      st.log_records_loaded = load.records;
      st.log_tails_cut = load.tails_cut;
      st.log_bytes_cut = load.bytes_cut;
      st.log_cuts = load.cuts;
    });
    // The records loaded become one snapshot, and the log starts empty: a cut tail is gone from the
    // files, and the directory holds what the map holds.
    if (!s.compact()) {
      throw KvstoreError("kvstore log: cannot write a snapshot in '" + s.options.log.dir +
                         "': " + s.stats.log_error + " ([kvstore] log_dir)");
    }
  }
}

Server::~Server() = default;

void Server::run() {
  Impl& s = *impl_;
  if (s.serving()) s.guarded("status", [&s] { s.publish_status(); });
  if (s.machine) s.guarded("pair", [&s] { s.send_pair_state(); });
  auto next_heartbeat = Clock::now() + std::chrono::milliseconds(s.options.heartbeat_ms);
  while (!s.stop_requested.load()) {
    auto wake = next_heartbeat;
    if (const auto expiry = s.next_expiry(); expiry && *expiry < wake) wake = *expiry;
    if (!s.replies.empty()) wake = std::min(wake, Clock::now() + kSnapshotRetry);
    if (s.log) {
      if (const auto sync = s.log->next_sync(); sync && *sync < wake) wake = *sync;
    }
    const auto timeout = std::chrono::ceil<std::chrono::milliseconds>(std::max(wake - Clock::now(), Clock::duration{}));
    std::vector<zmq_pollitem_t> items = {{s.snapshot.handle(), 0, ZMQ_POLLIN, 0},
                                         {s.collector.handle(), 0, ZMQ_POLLIN, 0},
                                         {nullptr, s.wakeup.fd(), ZMQ_POLLIN, 0}};
    // The pair's sockets: the peer's state, and the passive's mirror of the active.
    constexpr std::size_t kPeerItem = 3;
    if (s.pair_sub) items.push_back({s.pair_sub->handle(), 0, ZMQ_POLLIN, 0});
    const std::size_t mirror_item = items.size();
    if (s.mirror_sub) {
      items.push_back({s.mirror_sub->handle(), 0, ZMQ_POLLIN, 0});
      items.push_back({s.mirror_dealer->handle(), 0, ZMQ_POLLIN, 0});
    }
    try {
      zmq::poll(items.data(), items.size(), timeout);
    } catch (const zmq::error_t& error) {
      if (error.num() != EINTR) throw;
      continue;  // a signal: look at stop_requested again
    }
    if (items[2].revents & ZMQ_POLLIN) {
      s.wakeup.drain();
      if (s.serving()) s.guarded("status", [&s] { s.publish_status(); });  // woken for a new state, or to stop
    }
    for (int i = 0; i < kBatch && (items[0].revents & ZMQ_POLLIN); ++i) {
      if (!(s.snapshot.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      s.guarded("snapshot request", [&s] { s.handle_snapshot_request(); });
    }
    if (s.pair_sub && (items[kPeerItem].revents & ZMQ_POLLIN)) {
      for (int i = 0; i < kBatch && (s.pair_sub->get(zmq::sockopt::events) & ZMQ_POLLIN); ++i) {
        s.guarded("peer state", [&s] { s.handle_peer_state(); });
      }
    }
    // The mirror before the collector: a client's write whose KVPUB is here is not held.
    if (items.size() > mirror_item && (items[mirror_item].revents & ZMQ_POLLIN)) {
      for (int i = 0; i < kBatch && s.mirror_sub && (s.mirror_sub->get(zmq::sockopt::events) & ZMQ_POLLIN); ++i) {
        s.guarded("mirror", [&s] { s.handle_mirror_update(); });
      }
    }
    if (items.size() > mirror_item + 1 && (items[mirror_item + 1].revents & ZMQ_POLLIN)) {
      for (int i = 0; i < kBatch && s.mirror_dealer && (s.mirror_dealer->get(zmq::sockopt::events) & ZMQ_POLLIN);
           ++i) {
        s.guarded("mirror snapshot", [&s] { s.handle_mirror_snapshot(); });
      }
    }
    for (int i = 0; i < kBatch && (items[1].revents & ZMQ_POLLIN); ++i) {
      if (!(s.collector.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      s.guarded("update", [&s] { s.handle_update(); });
      // Between messages, not per batch: the log passes its bound by one message's records at most.
      if (s.log && s.log->open() && s.log->compaction_due()) s.compact();
    }
    const auto now = Clock::now();
    if (!s.replies.empty()) {
      s.guarded("snapshot reply", [&s, now] {
        if (const std::uint64_t whole = s.replies.pump(now); whole != 0) {
          s.count([whole](ServerStats& st) { st.snapshots += whole; });
        }
      });
    }
    if (s.serving()) s.guarded("expiry", [&s, now] { s.expire(now); });  // a passive: the active publishes them
    const bool heartbeat = now >= next_heartbeat;
    if (heartbeat) {
      if (s.machine) {
        s.guarded("pair", [&s, now] {
          s.send_pair_state();
          s.tend_mirror(now);
          s.tend_peer_link(now);
          const std::string peer = s.peer_state_text(now);
          s.count([&peer](ServerStats& st) { st.peer_state = peer; });
          // One line when the peer link falls silent and one when it is heard again, not one per heartbeat.
          if ((peer == "silent") != s.peer_silent) {
            s.peer_silent = peer == "silent";
            s.note_pair_event(s.peer_silent ? "pair: the peer is silent (no state for " +
                                                  std::to_string(kPeerSilenceHeartbeats) + " heartbeats), this server " +
                                                  std::string(name(s.machine->state()))
                                            : "pair: the peer is heard again (" + peer + "), this server " +
                                                  std::string(name(s.machine->state())));
          }
        });
      }
      if (s.serving()) s.guarded("status", [&s] { s.publish_status(); });
      s.guarded("heartbeat", [&s] { s.heartbeat(); });
      next_heartbeat = now + std::chrono::milliseconds(s.options.heartbeat_ms);
    }
    s.guarded("log", [&s, now, heartbeat] { s.tend_log(now, heartbeat); });
  }
  if (s.log && s.log->open()) {
    s.guarded("log", [&s] {
      try {
        s.log->sync(Clock::now(), true);
      } catch (const KvstoreError& error) {
        s.log_failed(error.what());
      }
    });
  }
}

void Server::set_state(protocol::ServiceState state) noexcept {
  impl_->state.store(state);
  impl_->wakeup.notify();
}

void Server::stop() noexcept {
  impl_->stop_requested.store(true);
  impl_->wakeup.notify();
}

ServerStats Server::stats() const {
  const std::uint64_t unauthenticated = impl_->zap ? impl_->zap->stats().refused : 0;
  const std::lock_guard<std::mutex> lock(impl_->stats_mutex);
  ServerStats stats = impl_->stats;
  stats.unauthenticated = unauthenticated;
  return stats;
}

std::vector<std::string> Server::take_pair_events() {
  const std::lock_guard<std::mutex> lock(impl_->stats_mutex);
  return std::exchange(impl_->pair_events, {});
}

std::vector<std::string> Server::take_security_refusals() {
  return impl_->zap ? impl_->zap->take_refusals() : std::vector<std::string>{};
}

const ServerOptions& Server::options() const { return impl_->options; }

const std::string& Server::stack_id() const { return impl_->stack_id; }

std::string Server::endpoint(int offset) const { return impl_->endpoint(offset); }

}  // namespace sectorflow::kvstore
