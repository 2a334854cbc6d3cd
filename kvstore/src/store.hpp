// The Clone core of the kvstore server (server.hpp): the map and its sequence, the three sockets'
// work (snapshots, the collector's updates, the publisher's KVPUBs and HUGZ), ttls, the rooms and
// quotas, the groups the stack's policy names (evicted oldest first, folded when over), the
// durable log (store_log.cpp) and the server's own status. A pair's link (pair_link.hpp) drives it
// through PairGate and the hooks it calls; the store knows no pair state. Private to the kvstore.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "map_usage.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"
#include "sectorflow/kvstore/record_log.hpp"
#include "sectorflow/kvstore/server.hpp"
#include "sectorflow/kvstore/stack_policy.hpp"
#include "sectorflow/kvstore/wakeup.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/protocol/service_state.hpp"
#include "sectorflow/security/zap_handler.hpp"
#include "snapshots.hpp"

namespace sectorflow::kvstore::detail {

using Clock = std::chrono::steady_clock;

// Messages read from one socket per wakeup, so that a flood on one port cannot starve the other
// port, the heartbeat or the ttl expiry.
inline constexpr int kBatch = 256;
// Queued KVPUBs per subscriber before ZeroMQ drops (the subscriber then sees a gap and resyncs).
inline constexpr int kPublisherHwm = 100000;

// Wall-clock milliseconds since the Unix epoch: the log's deadlines outlive the steady clock.
std::int64_t wall_ms();

// The account the stack's own records (StackPolicy::reserved) are charged to: no writer can take
// their room from the others.
inline const std::string kStackRoom = "the stack's records";

// Bytes a key takes in the map for the limits: key, properties and body.
std::size_t footprint(const KvMsg& msg);

struct Entry {
  std::shared_ptr<const KvMsg> msg;  // shared with the snapshot replies that still have to send it
  std::optional<Clock::time_point> expires;
  MapUsage::Held held;  // who is charged for it; the server's own status is charged to nobody
  std::string writer;   // the authenticated identity that wrote it last ("" without CURVE)
};

// The map as the stack's policy reads it.
class MapView final : public StoreView {
 public:
  explicit MapView(const std::map<std::string, Entry>& map) : map_(map) {}
  std::optional<Value> find(const std::string& key) const override;
  void visit(const std::string& prefix, const Visit& visit) const override;

 private:
  const std::map<std::string, Entry>& map_;
};

// Who sent a message: its ZAP identity ("" without CURVE) and its network address.
struct Sender {
  std::string identity;
  std::string address;
};

Sender sender_of(zmq::message_t& frame);
// The identity the ZAP handler gave the sender's key ("<role>/<name>"), or "" without CURVE.
std::string user_id(zmq::message_t& frame);

// What a pair's link decides for the store (kvstore/SPEC.md, "The pair"): whether it serves, which
// snapshot requests it answers (the vote), what becomes of a client's write while it does not serve,
// and the pair's fields of the server's status. A single server has none.
class PairGate {
 public:
  virtual bool serving() const = 0;
  /// Whether a valid snapshot request, whose sender's frame is `frame`, is answered.
  virtual bool admit_snapshot(zmq::message_t& frame) = 0;
  /// Takes a client's write (the frames of one kvmsg) while this server does not serve.
  virtual void hold(std::vector<zmq::message_t>&& parts) = 0;
  /// Adds the pair's fields to the server's status, from the counters `stats`.
  virtual void describe(protocol::ServiceStatus& status, const ServerStats& stats) const = 0;

 protected:
  ~PairGate() = default;
};

struct Store {
  Store(ServerOptions opts, std::unique_ptr<const StackPolicy> stack_policy);

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
  PairGate* gate = nullptr;  // a pair's link, which outlives the loop; none for a single server

  std::map<std::string, Entry> map;
  MapView view{map};
  std::multimap<Clock::time_point, std::string> expiries;  // entries whose key was set again are skipped
  std::int64_t sequence = 0;
  std::string own_status_key;
  MapUsage usage;        // every key but the stack's records, charged to its writer
  MapUsage stack_usage;  // the stack's own records, in a room of their own charged to kStackRoom
  // The groups (StackPolicy::group_of) that hold records, by the sequence of their first record:
  // the oldest goes first when the room is full.
  std::map<std::string, std::int64_t> group_born;
  std::set<std::pair<std::int64_t, std::string>> groups_by_age;
  // The folded groups, by the sequence of their fold: past scans_kept the oldest goes.
  std::map<std::string, std::int64_t> fold_born;
  std::set<std::pair<std::int64_t, std::string>> folds_by_age;
  SnapshotReplies replies;
  std::vector<zmq::message_t> parts;  // the frames of the message being handled

  mutable std::mutex stats_mutex;
  ServerStats stats;
  std::optional<protocol::ServiceStatus> published_status;  // without its time stamp
  std::optional<RecordLog> log;  // with a log_dir: the durable records
  std::string stack_id;          // kept in the log_dir, or new at every start without one

  // Whether this server serves: a single server always, one of a pair as its link says.
  bool serving() const { return gate == nullptr || gate->serving(); }
  std::string endpoint(int offset) const;
  void bind(zmq::socket_t& socket, int offset, const std::string& role);

  void count(const std::function<void(ServerStats&)>& change);
  // Counts one refusal of `kind` in `counter`, keeping the text of the first of its kind.
  void refuse(std::uint64_t ServerStats::*counter, const char* kind, const std::string& why);
  void reject(const std::string& why);
  // Runs the handling of one message (or one timer); what it throws is counted, and the loop goes on.
  void guarded(const char* what, const std::function<void()>& handle);

  // ---- The Clone core (store.cpp) ----
  // Publishes an update with the next sequence, after appending it to the log (deadline_ms: when
  // a set expires, Unix ms, 0 never; writer and account: who wrote it and who it is charged to).
  void publish(KvMsg& msg, std::int64_t deadline_ms = 0, const std::string& writer = {},
               const std::string& account = {});
  void handle_snapshot_request();
  void handle_update();
  // Applies the write in `parts` (`frames` of them), as written by `pending_sender` (a write a pair's
  // passive held) or else by the sender of `parts`.
  void apply_update(std::size_t frames, const Sender* pending_sender = nullptr);
  void handle_deletion(KvMsg& msg);
  void expire(Clock::time_point now);
  std::optional<Clock::time_point> next_expiry();
  void forget_expiry(std::map<std::string, Entry>::const_iterator entry);
  // Becoming active in a pair: every key with a ttl lives at least its whole ttl from now; returns
  // how many keys it extended.
  std::uint64_t grant_grace();
  void publish_status();
  void heartbeat();
  // Empties the map, its rooms and its groups (a pair's passive replaces it by the active's).
  void clear_map();

  // ---- Rooms and groups (store_groups.cpp) ----
  // Erases a key from the map and from its room; a group whose last record goes is forgotten.
  void drop(std::map<std::string, Entry>::iterator entry);
  // Publishes the deletion of one key and erases it.
  void erase_published(std::map<std::string, Entry>::iterator entry);
  void erase_group(const std::string& group);
  bool evict_oldest_group_but(const std::string& keep);
  void maybe_fold(const std::string& group);
  void note_fold(const std::string& group, std::int64_t born);
  void forget_fold(const std::string& group);
  void drop_oldest_fold(const std::string& current);

  // ---- The durable records (store_log.cpp) ----
  // Loads the log_dir's snapshot and log at start and compacts them; throws KvstoreError naming
  // the log_dir when no snapshot can be written.
  void load_log();
  // Appends one record to the log while it is open; a failure is counted, not thrown.
  void log_append(const LogRecord& record);
  void log_failed(const std::string& why);
  // Applies one record of the log (or of a mirrored snapshot): the map becomes what it was when
  // the record was written.
  void restore(LogRecord&& record);
  // Writes the live map as a new snapshot and begins a new log; a failure is counted, not thrown.
  bool compact();
  // Compacts when the open log passed log_max_bytes: checked after each message the store applies,
  // so the log passes its bound by one message's records at most.
  void compact_if_due();
  // Between turns of the loop: syncs the log as its policy says, compacts it when it passed its
  // bound, and after a failure tries a compaction at every heartbeat (`heartbeat`).
  void tend_log(Clock::time_point now, bool heartbeat);
};

}  // namespace sectorflow::kvstore::detail
