#include "pair_link.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/stack_id.hpp"

namespace sectorflow::kvstore::detail {
namespace {

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

// This server as a CURVE client of its peer (the peer link's SUB, the passive's mirror): both servers
// of a pair hold the one kvstore key pair, so the peer's public key is this server's own.
security::CurveClient peer_client_curve(const security::CurveServer& curve) {
  return security::CurveClient{curve.public_key, curve.secret_key, curve.public_key};
}

std::int64_t peer_link_frame_bytes(const security::CurveServer& curve) {
  return curve.enabled() ? kPeerLinkCurveFrameBytes : kPeerLinkFrameBytes;
}

}  // namespace

security::CurveServer peer_link_curve(const security::CurveServer& curve) {
  security::CurveServer link{curve.public_key, curve.secret_key, std::string(kPeerLinkDomain), {}};
  for (const auto& [key, identity] : curve.peers) {
    if (identity.compare(0, kKvstoreIdentityPrefix.size(), kKvstoreIdentityPrefix) == 0) {
      link.peers.emplace(key, identity);
    }
  }
  return link;
}

PairLink::PairLink(Store& store)
    : store_(store),
      machine_(store.options.pair.role == PairRole::kPrimary,
               std::chrono::milliseconds(store.options.heartbeat_ms) * kPeerSilenceHeartbeats, Clock::now()),
      pair_pub_(store.context, zmq::socket_type::pub) {
  pair_pub_.set(zmq::sockopt::linger, 0);
  pair_pub_.set(zmq::sockopt::maxmsgsize, peer_link_frame_bytes(store.options.curve));
  // The peer link is a CURVE server like the store's three sockets (a keyless peer is counted by
  // the same ZAP monitors), in a domain that admits the kvstore key alone.
  if (store.options.curve.enabled()) security::apply(pair_pub_, peer_link_curve(store.options.curve));
}

void PairLink::start() {
  store_.bind(pair_pub_, 3, "pair state (PUB)");
  connect_peer_link(Clock::now());
  store_.stats.pair_state = std::string(name(machine_.state()));
}

void PairLink::send_state() {
  const std::string_view pair_state = name(machine_.state());
  pair_pub_.send(zmq::buffer(pair_state.data(), pair_state.size()), zmq::send_flags::dontwait);
}

// The Binary Star vote: a passive serves only when its active is silent and a client asks. Only a
// client that could write votes (StackPolicy::votes, with [security] on; anyone without, the network
// being trusted): a viewer's key (every screen holds one) could otherwise make a second active
// beside a live one whose peer link alone was cut.
bool PairLink::admit_snapshot(zmq::message_t& frame) {
  if (!serving() && store_.options.curve.enabled() && !store_.policy->votes(user_id(frame))) {
    store_.count([](ServerStats& st) { ++st.snapshots_refused; });
    return false;
  }
  const PairMachine::Outcome outcome = machine_.on_request(Clock::now());
  on_outcome(outcome);
  if (!outcome.serve) {
    store_.count([](ServerStats& st) { ++st.snapshots_refused; });
    return false;
  }
  return true;
}

void PairLink::describe(protocol::ServiceStatus& status, const ServerStats& stats) const {
  status.extra["pair"] = std::string(machine_.primary() ? "primary" : "backup");
  status.extra["pair_state"] = std::string(name(machine_.state()));
  status.extra["peer_state"] = stats.peer_state.empty() ? std::string("unheard") : stats.peer_state;
  status.extra["peer"] = store_.options.pair.peer_host + ":" + std::to_string(store_.options.pair.peer_port);
  status.extra["failovers"] = static_cast<std::int64_t>(stats.failovers);
  status.extra["splits"] = static_cast<std::int64_t>(stats.splits);
  status.extra["pending_applied"] = static_cast<std::int64_t>(stats.pending_applied);
  status.extra["pending_lost"] = static_cast<std::int64_t>(stats.pending_lost);
  status.extra["pending_unmatched"] = static_cast<std::int64_t>(stats.pending_unmatched);
  status.extra["snapshots_refused"] = static_cast<std::int64_t>(stats.snapshots_refused);
  status.extra["mirrored"] = static_cast<std::int64_t>(stats.mirrored);
}

void PairLink::poll_items(std::vector<zmq_pollitem_t>& items) {
  first_item_ = items.size();
  items.push_back({pair_sub_->handle(), 0, ZMQ_POLLIN, 0});
  if (mirror_sub_) {
    items.push_back({mirror_sub_->handle(), 0, ZMQ_POLLIN, 0});
    items.push_back({mirror_dealer_->handle(), 0, ZMQ_POLLIN, 0});
  }
}

// The mirror before the collector (the server's loop reads this first): a client's write whose
// KVPUB is here is not held.
void PairLink::on_readable(const std::vector<zmq_pollitem_t>& items) {
  const auto readable = [&items](std::size_t item) {
    return items.size() > item && (items[item].revents & ZMQ_POLLIN) != 0;
  };
  const auto more = [](const std::optional<zmq::socket_t>& socket) {
    return socket && (socket->get(zmq::sockopt::events) & ZMQ_POLLIN) != 0;
  };
  if (readable(first_item_)) {
    for (int i = 0; i < kBatch && more(pair_sub_); ++i) {
      store_.guarded("peer state", [this] { handle_peer_state(); });
    }
  }
  if (readable(first_item_ + 1)) {
    for (int i = 0; i < kBatch && more(mirror_sub_); ++i) {
      store_.guarded("mirror", [this] { handle_mirror_update(); });
    }
  }
  if (readable(first_item_ + 2)) {
    for (int i = 0; i < kBatch && more(mirror_dealer_); ++i) {
      store_.guarded("mirror snapshot", [this] { handle_mirror_snapshot(); });
    }
  }
}

void PairLink::on_heartbeat(Clock::time_point now) {
  send_state();
  tend_mirror(now);
  // A new SUB to the peer's P + 3. libzmq gives up a connection whose handshake failed (a fake
  // peer, a key not yet in place, a peer briefly without [security]), so a link silent for
  // kStalledHeartbeats heartbeats is connected anew: the real peer is heard once it is back.
  if (now - peer_link_since_ > heartbeat_period() * kStalledHeartbeats) connect_peer_link(now);
  const std::string peer = peer_state_text(now);
  store_.count([&peer](ServerStats& st) { st.peer_state = peer; });
  // One line when the peer link falls silent and one when it is heard again, not one per heartbeat.
  if ((peer == "silent") != peer_silent_) {
    peer_silent_ = peer == "silent";
    note_event(peer_silent_ ? "pair: the peer is silent (no state for " + std::to_string(kPeerSilenceHeartbeats) +
                                  " heartbeats), this server " + std::string(name(machine_.state()))
                            : "pair: the peer is heard again (" + peer + "), this server " +
                                  std::string(name(machine_.state())));
  }
}

// Not active: keeps a client's write until the active's KVPUB of its uuid comes, or this server
// becomes active (kvstore/SPEC.md, "The pair"). A message that is no kvmsg is judged when applied.
void PairLink::hold(std::vector<zmq::message_t>&& parts) {
  Sender sender = sender_of(parts[0]);
  std::string uuid(frame_views(parts)[kFrameUuid]);
  if (!uuid.empty() && mirrored_uuids_.count(uuid) != 0) return;  // the active published it already
  std::size_t bytes = 0;
  for (const zmq::message_t& part : parts) bytes += part.size();
  // Bounded in writes and in bytes (max_map_bytes: what the map itself may hold).
  while (!pending_.empty() &&
         (pending_.size() >= kMaxPending || pending_bytes_ + bytes > store_.options.max_map_bytes)) {
    drop_pending_front();
    const bool first = store_.stats.pending_lost == 0;
    store_.count([](ServerStats& st) { ++st.pending_lost; });
    if (first) {
      note_event("pending writes past " + std::to_string(kMaxPending) + " or max_map_bytes" +
                 ": the oldest are dropped (pending_lost), lost if the active never published them");
    }
  }
  pending_bytes_ += bytes;
  pending_.push_back(Pending{std::move(parts), uuid, Clock::now(), bytes, std::move(sender)});
  if (!uuid.empty()) {
    if (const auto old = pending_by_uuid_.find(uuid); old != pending_by_uuid_.end()) {
      pending_bytes_ -= old->second->bytes;
      pending_.erase(old->second);
    }
    pending_by_uuid_[uuid] = std::prev(pending_.end());
  }
  store_.count([this](ServerStats& st) { st.pending = pending_.size(); });
}

void PairLink::drop_pending_front() {
  const Pending& oldest = pending_.front();
  if (!oldest.uuid.empty()) pending_by_uuid_.erase(oldest.uuid);
  pending_bytes_ -= oldest.bytes;
  pending_.pop_front();
}

void PairLink::note_event(std::string line) {
  const std::lock_guard<std::mutex> lock(events_mutex_);
  if (events_.size() < 1000) events_.push_back(std::move(line));
}

std::vector<std::string> PairLink::take_events() {
  const std::lock_guard<std::mutex> lock(events_mutex_);
  return std::exchange(events_, {});
}

std::string PairLink::peer_endpoint(int offset) const {
  return "tcp://" + store_.options.pair.peer_host + ":" + std::to_string(store_.options.pair.peer_port + offset);
}

Clock::duration PairLink::heartbeat_period() const { return std::chrono::milliseconds(store_.options.heartbeat_ms); }

void PairLink::on_outcome(const PairMachine::Outcome& outcome) {
  if (!outcome.changed()) return;
  note_event("pair: " + std::string(name(outcome.before)) + " -> " + std::string(name(outcome.after)) + " on " +
             std::string(name(outcome.event)) + (outcome.why.empty() ? "" : ": " + std::string(outcome.why)));
  store_.count([&outcome](ServerStats& st) {
    st.pair_state = std::string(name(outcome.after));
    if (outcome.before == PairState::kPassive && outcome.after == PairState::kActive &&
        outcome.event == PairEvent::kRequestPeerSilent) {
      ++st.failovers;
    }
    if (outcome.before == PairState::kActive && outcome.after == PairState::kPassive) ++st.splits;
  });
  if (outcome.after == PairState::kActive) {
    become_active();
  } else if (outcome.after == PairState::kPassive) {
    become_passive();
  }
  send_state();
}

void PairLink::become_active() {
  stop_mirror();
  apply_pending();
  store_.guarded("grace", [this] {
    if (const std::uint64_t extended = store_.grant_grace(); extended != 0) {
      note_event("gave " + std::to_string(extended) + " key(s) with a ttl their whole ttl from becoming active");
    }
  });
  store_.published_status.reset();  // says at once that this server is the active
  store_.guarded("status", [this] { store_.publish_status(); });
}

void PairLink::become_passive() { start_mirror(); }

void PairLink::handle_peer_state() {
  zmq::message_t frame;
  if (!pair_sub_->recv(frame, zmq::recv_flags::dontwait)) return;
  const bool one_frame = !frame.more();
  for (bool more = frame.more(); more;) {  // drained, so the next message starts clean
    zmq::message_t rest;
    if (!pair_sub_->recv(rest, zmq::recv_flags::dontwait)) break;
    more = rest.more();
  }
  const std::optional<PairState> peer = one_frame ? parse_pair_state(frame.to_string_view()) : std::nullopt;
  if (!peer) {
    store_.reject("peer link: expected a pair state (primary, backup, active, passive), got " +
                  std::to_string(frame.size()) + " bytes");
    return;
  }
  peer_heard_ = *peer;
  peer_link_since_ = Clock::now();
  on_outcome(machine_.on_peer(*peer, Clock::now()));
}

void PairLink::connect_peer_link(Clock::time_point now) {
  pair_sub_.emplace(store_.context, zmq::socket_type::sub);
  pair_sub_->set(zmq::sockopt::linger, 0);
  pair_sub_->set(zmq::sockopt::maxmsgsize, peer_link_frame_bytes(store_.options.curve));
  pair_sub_->set(zmq::sockopt::subscribe, "");
  security::apply(*pair_sub_, peer_client_curve(store_.options.curve));  // nothing without [security]
  pair_sub_->connect(peer_endpoint(3));
  peer_link_since_ = now;
}

// The state the peer said last, or "silent" when it said nothing within the silence period.
std::string PairLink::peer_state_text(Clock::time_point now) const {
  if (!peer_heard_) return machine_.peer_alive(now) ? std::string() : std::string("silent");
  return machine_.peer_alive(now) ? std::string(name(*peer_heard_)) : std::string("silent");
}

// Becoming passive: new sockets to the active, and a full snapshot once the SUB hears it.
void PairLink::start_mirror() {
  stop_mirror();
  mirror_sub_.emplace(store_.context, zmq::socket_type::sub);
  mirror_dealer_.emplace(store_.context, zmq::socket_type::dealer);
  const std::int64_t max_frame = max_frame_bytes(store_.options.max_value_bytes);
  for (zmq::socket_t* socket : {&*mirror_sub_, &*mirror_dealer_}) {
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::maxmsgsize, max_frame);
  }
  for (zmq::socket_t* socket : {&*mirror_sub_, &*mirror_dealer_}) {
    security::apply(*socket, peer_client_curve(store_.options.curve));  // nothing without [security]
  }
  mirror_sub_->set(zmq::sockopt::rcvhwm, kPublisherHwm);
  mirror_sub_->set(zmq::sockopt::subscribe, "");
  mirror_sub_->connect(peer_endpoint(1));
  mirror_dealer_->connect(peer_endpoint(0));
  mirror_ = Mirror::kConnecting;
  mirror_since_ = Clock::now();
}

void PairLink::stop_mirror() {
  mirror_sub_.reset();
  mirror_dealer_.reset();
  mirror_snapshot_.clear();
  mirror_buffer_.clear();
  mirror_ = Mirror::kOff;
}

void PairLink::ask_snapshot() {
  mirror_dealer_->send(zmq::buffer(kSnapshotRequest), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  mirror_dealer_->send(zmq::message_t(), zmq::send_flags::dontwait);
  mirror_snapshot_.clear();
  mirror_buffer_.clear();
  mirror_ = Mirror::kSyncing;
  mirror_since_ = Clock::now();
}

// A snapshot that does not end within kStalledHeartbeats heartbeats (the active died or yielded
// mid-reply) is asked for again on new sockets.
// So is a mirror that heard nothing for as long: a failed CURVE handshake (a wrong key, the
// peer's or this server's) is a protocol error, after which libzmq never reconnects that socket.
void PairLink::tend_mirror(Clock::time_point now) {
  if ((mirror_ == Mirror::kSyncing || mirror_ == Mirror::kConnecting) &&
      now - mirror_since_ > heartbeat_period() * kStalledHeartbeats) {
    start_mirror();
  }
}

std::optional<KvMsg> PairLink::read_mirror(zmq::socket_t& socket) {
  const std::size_t frames = recv_frames(socket, mirror_parts_, kKvmsgFrames + 1);
  if (frames == 0) return std::nullopt;
  if (frames != kKvmsgFrames) {
    store_.reject("mirror: kvmsg of " + std::to_string(frames) + " frames from the active, expected " +
                  std::to_string(kKvmsgFrames));
    return std::nullopt;
  }
  try {
    return decode_kvmsg(frame_views(mirror_parts_));
  } catch (const KvstoreError& error) {
    store_.reject(std::string("mirror: ") + error.what());
    return std::nullopt;
  }
}

// A KVPUB or HUGZ of the active.
void PairLink::handle_mirror_update() {
  std::optional<KvMsg> msg = read_mirror(*mirror_sub_);
  if (!msg) return;
  if (mirror_ == Mirror::kConnecting) {
    ask_snapshot();  // the subscription is live: nothing published from now on is missed
    if (msg->key == kHeartbeat) return;
  }
  if (msg->key == kHeartbeat) {
    if (mirror_ == Mirror::kMirroring && msg->sequence != store_.sequence) {
      // Updates missed (a full pipe) or the active restarted: the whole map again.
      note_event("mirror: the active's heartbeat says sequence " + std::to_string(msg->sequence) +
                 ", this server holds " + std::to_string(store_.sequence) + ": taking a new snapshot");
      ask_snapshot();
    }
    age_pending(Clock::now());
    return;
  }
  if (mirror_ == Mirror::kSyncing) {
    mirror_buffer_.push_back(std::move(*msg));
    return;
  }
  if (mirror_ != Mirror::kMirroring || msg->sequence <= store_.sequence) return;
  if (msg->sequence != store_.sequence + 1) {
    note_event("mirror: update " + std::to_string(msg->sequence) + " after " + std::to_string(store_.sequence) +
               " (a gap): taking a new snapshot");
    ask_snapshot();
    return;
  }
  apply_mirrored(std::move(*msg));
}

// A KVSYNC or the KTHXBAI that ends the snapshot.
void PairLink::handle_mirror_snapshot() {
  std::optional<KvMsg> msg = read_mirror(*mirror_dealer_);
  if (!msg || mirror_ != Mirror::kSyncing) return;
  if (msg->key != kSnapshotEnd) {
    mirror_snapshot_.push_back(std::move(*msg));
    return;
  }
  // The snapshot replaces the map: what this server held apart from the active is gone.
  store_.clear_map();
  std::string active_stack;
  for (KvMsg& entry : mirror_snapshot_) {
    if (entry.key == store_.own_status_key) {
      try {
        active_stack = stack_id_of(protocol::ServiceStatus::decode(entry.body));
      } catch (const std::exception&) {
      }
      continue;
    }
    store_.restore(to_record(std::move(entry)));
  }
  mirror_snapshot_.clear();
  store_.sequence = msg->sequence;
  if (!active_stack.empty() && active_stack != store_.stack_id) take_stack_id(active_stack);
  mirror_ = Mirror::kMirroring;
  if (store_.log) store_.compact();  // the directory now holds what the active holds
  std::vector<KvMsg> buffered = std::move(mirror_buffer_);
  mirror_buffer_.clear();
  store_.count([](ServerStats& st) { ++st.mirror_syncs; });
  note_event("mirror: snapshot of the active taken at sequence " + std::to_string(store_.sequence) + ", " +
             std::to_string(store_.map.size()) + " keys");
  for (KvMsg& update : buffered) {
    if (mirror_ != Mirror::kMirroring) break;
    if (update.sequence <= store_.sequence) continue;
    if (update.sequence != store_.sequence + 1) {
      ask_snapshot();
      break;
    }
    apply_mirrored(std::move(update));
  }
}

void PairLink::take_stack_id(const std::string& id) {
  note_event("stack " + id + ", the active's, replaces " + store_.stack_id + " (the pair shares one stack)");
  store_.stack_id = id;
  if (store_.log) {
    try {
      store_.log->replace_stack_id(id);
    } catch (const KvstoreError& error) {
      store_.log_failed(error.what());
    }
  }
}

LogRecord PairLink::to_record(KvMsg&& msg) const {
  LogRecord record;
  record.kind = msg.is_delete() ? LogRecord::Kind::kDelete : LogRecord::Kind::kSet;
  record.sequence = msg.sequence;
  record.key = std::move(msg.key);
  if (!msg.is_delete()) {
    double ttl_s = 0.0;
    try {
      ttl_s = std::min(msg.ttl_s(), store_.options.max_ttl_s);
    } catch (const KvstoreError&) {
    }
    // The active counts the ttl from its write; the mirror from now, a little later.
    if (ttl_s > 0.0) record.deadline_ms = wall_ms() + static_cast<std::int64_t>(std::ceil(ttl_s * 1000.0));
    // The active's stamp, trusted: the mirror's sockets reach only a holder of the kvstore key.
    if (store_.options.curve.enabled()) {
      if (const auto writer = msg.properties.find(std::string(kWriterProperty)); writer != msg.properties.end()) {
        record.writer = writer->second;
        if (!store_.policy->reserved(record.key)) record.account = record.writer;
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
void PairLink::apply_mirrored(KvMsg&& msg) {
  std::string uuid = msg.uuid;
  LogRecord record = to_record(std::move(msg));
  store_.log_append(record);
  store_.restore(std::move(record));
  if (!uuid.empty()) {
    if (const auto held = pending_by_uuid_.find(uuid); held != pending_by_uuid_.end()) {
      pending_bytes_ -= held->second->bytes;
      pending_.erase(held->second);
      pending_by_uuid_.erase(held);
    }
    if (mirrored_uuids_.insert(uuid).second) {
      mirrored_order_.push_back(std::move(uuid));
      if (mirrored_order_.size() > kMirroredUuids) {
        mirrored_uuids_.erase(mirrored_order_.front());
        mirrored_order_.pop_front();
      }
    }
  }
  store_.count([this](ServerStats& st) {
    ++st.mirrored;
    st.pending = pending_.size();
  });
  store_.compact_if_due();
}

// While the active lives (its heartbeat came), a write it has not published for
// kPendingHeartbeats heartbeats was refused by it: holding it would apply it at a failover.
void PairLink::age_pending(Clock::time_point now) {
  std::uint64_t dropped = 0;
  while (!pending_.empty() && now - pending_.front().received > heartbeat_period() * kPendingHeartbeats) {
    drop_pending_front();
    ++dropped;
  }
  if (dropped != 0) {
    store_.count([this, dropped](ServerStats& st) {
      st.pending_unmatched += dropped;
      st.pending = pending_.size();
    });
  }
}

// Becoming active: the writes still held were taken by no active this server mirrored (the dead
// active took them and never published them, or no active was there); applied in their order.
void PairLink::apply_pending() {
  std::list<Pending> held = std::move(pending_);
  pending_.clear();
  pending_by_uuid_.clear();
  pending_bytes_ = 0;
  std::uint64_t applied = 0;
  for (Pending& write : held) {
    store_.parts = std::move(write.parts);
    store_.guarded("pending update", [this, &write] { store_.apply_update(store_.parts.size(), &write.sender); });
    ++applied;
  }
  store_.parts.clear();
  if (applied != 0) note_event("applied " + std::to_string(applied) + " pending write(s) on becoming active");
  store_.count([applied](ServerStats& st) {
    st.pending_applied += applied;
    st.pending = 0;
  });
}

}  // namespace sectorflow::kvstore::detail
