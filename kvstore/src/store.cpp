#include "store.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/stack_id.hpp"

namespace sectorflow::kvstore::detail {

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::size_t footprint(const KvMsg& msg) {
  std::size_t bytes = msg.key.size() + msg.body.size();
  for (const auto& [name, value] : msg.properties) bytes += name.size() + value.size() + 2;
  return bytes;
}

std::string user_id(zmq::message_t& frame) {
  const char* identity = zmq_msg_gets(frame.handle(), "User-Id");
  return identity != nullptr ? std::string(identity) : std::string();
}

namespace {

// The network address of a message's sender, as libzmq saw the connection.
std::string peer_address(zmq::message_t& frame) {
  const char* address = zmq_msg_gets(frame.handle(), "Peer-Address");
  return address != nullptr ? std::string(address) : std::string("unknown");
}

// The limits of the clients' keys, and of the stack's room (charged to one account: no quota within it).
MapLimits client_limits(const ServerOptions& o) {
  return {o.max_keys, o.max_map_bytes, o.max_keys_per_address, o.max_map_bytes_per_address};
}

MapLimits stack_limits(const ServerOptions& o) {
  return {o.max_stack_keys, o.max_stack_bytes, o.max_stack_keys, o.max_stack_bytes};
}

}  // namespace

Sender sender_of(zmq::message_t& frame) { return Sender{user_id(frame), peer_address(frame)}; }

std::optional<StoreView::Value> MapView::find(const std::string& key) const {
  const auto found = map_.find(key);
  if (found == map_.end()) return std::nullopt;
  return Value{found->second.msg->body, found->second.writer};
}

void MapView::visit(const std::string& prefix, const Visit& visit) const {
  for (auto it = map_.lower_bound(prefix); it != map_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    if (!visit(it->first, Value{it->second.msg->body, it->second.writer})) return;
  }
}

Store::Store(ServerOptions opts, std::unique_ptr<const StackPolicy> stack_policy)
    : options(std::move(opts)),
      policy(std::move(stack_policy)),
      own_status_key(protocol::status_key(protocol::kServiceKvstore, options.status_name)),
      usage(client_limits(options)),
      stack_usage(stack_limits(options)),
      replies(snapshot, kMaxWaitingSnapshots, std::chrono::milliseconds(options.heartbeat_ms) * kStalledHeartbeats,
              [this](const std::string& why) { refuse(&ServerStats::snapshots_dropped, "snapshots_dropped", why); }) {}

std::string Store::endpoint(int offset) const {
  return "tcp://" + options.bind_host + ":" + std::to_string(options.port + offset);
}

void Store::bind(zmq::socket_t& socket, int offset, const std::string& role) {
  const std::string address = endpoint(offset);
  try {
    socket.bind(address);
  } catch (const zmq::error_t& error) {
    throw KvstoreError("kvstore server: cannot bind the " + role + " socket to " + address + ": " + error.what() +
                       " (stop the program holding that port, or choose another kvstore port)");
  }
}

void Store::count(const std::function<void(ServerStats&)>& change) {
  const std::lock_guard<std::mutex> lock(stats_mutex);
  change(stats);
  stats.sequence = sequence;
  stats.keys = map.size();
  stats.map_bytes = usage.bytes() + stack_usage.bytes();
}

void Store::refuse(std::uint64_t ServerStats::*counter, const char* kind, const std::string& why) {
  count([&](ServerStats& s) {
    ++(s.*counter);
    s.first_refusals.try_emplace(kind, why);
  });
}

void Store::reject(const std::string& why) {
  count([&why](ServerStats& s) {
    ++s.malformed;
    s.last_malformed = why;
    s.first_refusals.try_emplace("malformed", why);
  });
}

void Store::guarded(const char* what, const std::function<void()>& handle) {
  try {
    handle();
  } catch (const std::exception& error) {
    refuse(&ServerStats::errors, "errors", std::string(what) + ": " + error.what());
  }
}

void Store::publish(KvMsg& msg, std::int64_t deadline_ms, const std::string& writer, const std::string& account) {
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
    log_append(record);
  }
  send_kvmsg(publisher, msg);
}

void Store::handle_snapshot_request() {
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
  if (gate != nullptr && !gate->admit_snapshot(parts[1])) return;  // a pair's vote (pair_link.hpp)
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

void Store::handle_update() {
  const std::size_t frames = recv_frames(collector, parts, kKvmsgFrames + 1);
  if (frames == 0) return;
  if (!serving() && frames == kKvmsgFrames) {
    gate->hold(std::move(parts));
    parts.clear();
    return;
  }
  apply_update(frames);
}

void Store::apply_update(std::size_t frames, const Sender* pending_sender) {
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
  MapUsage& room = stack ? stack_usage : usage;
  const MapUsage::Held held{account, footprint(msg)};
  const auto existing = map.find(msg.key);
  const MapUsage::Held* old = existing != map.end() ? &existing->second.held : nullptr;
  MapUsage::Verdict verdict = room.check(account, held.bytes, old);
  while (stack && verdict != MapUsage::Verdict::kAccepted && evict_oldest_group_but(group)) {
    verdict = room.check(account, held.bytes, old);
  }
  if (verdict != MapUsage::Verdict::kAccepted) {
    const std::string why = "update from " + address + ": kvmsg '" + msg.key + "' refused: kvstore full: " +
                            (stack ? std::string("the stack's records fill their room with no older scan left "
                                                 "to erase ([kvstore] max_stack_keys, max_stack_bytes)")
                                   : room.why(verdict, account));
    if (verdict == MapUsage::Verdict::kOverQuota && !stack) {
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

void Store::handle_deletion(KvMsg& msg) {
  if (const auto found = map.find(msg.key); found != map.end()) {
    drop(found);
    publish(msg);
  }
  count([](ServerStats& s) { ++s.updates; });
}

void Store::expire(Clock::time_point now) {
  std::uint64_t expired = 0;
  for (auto next = next_expiry(); next && *next <= now; next = next_expiry()) {
    const auto entry = map.find(expiries.begin()->second);
    expiries.erase(expiries.begin());
    erase_published(entry);
    ++expired;
  }
  if (expired != 0) count([expired](ServerStats& s) { s.expired += expired; });
}

// The earliest expiry of a live entry; drops index entries of keys set again, deleted or expired.
std::optional<Clock::time_point> Store::next_expiry() {
  while (!expiries.empty()) {
    const auto& [when, key] = *expiries.begin();
    const auto found = map.find(key);
    if (found != map.end() && found->second.expires == when) return when;
    expiries.erase(expiries.begin());
  }
  return std::nullopt;
}

// Takes a key's pending expiry out of the index. The index would otherwise keep erased and
// rewritten scan records until their ttl (a day): memory that grew with every scan.
void Store::forget_expiry(std::map<std::string, Entry>::const_iterator entry) {
  if (!entry->second.expires) return;
  const auto [first, last] = expiries.equal_range(*entry->second.expires);
  for (auto it = first; it != last; ++it) {
    if (it->second == entry->first) {
      expiries.erase(it);
      return;
    }
  }
}

// Becoming active: every key with a ttl lives at least its whole ttl from now. Its holder's
// refreshes went to a dead active, or reached this server only as the mirror's copy, while its
// client was still finding the new active; a holder is silent only once it has had a whole ttl to
// find this server (the aggregator's lease: a takeover needs the holder silent, not a lost echo).
std::uint64_t Store::grant_grace() {
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
  return extended;
}

// The server's own status, published when a counter changed since the last time.
void Store::publish_status() {
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
  if (gate != nullptr) gate->describe(status, now);
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

void Store::heartbeat() {
  KvMsg hugz;
  hugz.key = std::string(kHeartbeat);
  hugz.sequence = sequence;
  if (!serving()) hugz.body = std::string(kPassiveHeartbeat);
  send_kvmsg(publisher, hugz);
}

void Store::clear_map() {
  map.clear();
  expiries.clear();
  usage = MapUsage(client_limits(options));
  stack_usage = MapUsage(stack_limits(options));
  group_born.clear();
  groups_by_age.clear();
  fold_born.clear();
  folds_by_age.clear();
  published_status.reset();
}

}  // namespace sectorflow::kvstore::detail
