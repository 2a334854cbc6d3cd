#include "agent.hpp"

#include <algorithm>
#include <cerrno>
#include <sstream>
#include <zmq_addon.hpp>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/server.hpp"
#include "sectorflow/protocol/records.hpp"

namespace sectorflow::kvstore::detail {
namespace {

// Messages read from one socket per wakeup, so that commands and timers keep their turn.
constexpr int kBatch = 256;
// Refresh an own key this many times per ttl: two refreshes may be lost before it expires.
constexpr double kRefreshesPerTtl = 3.0;
// Writes queued in the XPUB before the agent waits for it to drain (it never drops: XPUB_NODROP).
constexpr int kPublisherHwm = 100000;

bool readable(const zmq::socket_t& socket) {
  return (socket.get(zmq::sockopt::events) & ZMQ_POLLIN) != 0;
}

bool starts_with(const std::string& text, std::string_view prefix) { return text.compare(0, prefix.size(), prefix) == 0; }

// The statuses of kvstore servers: a client stamps none of them.
const std::string kServerStatusPrefix =
    std::string(protocol::kStatusPrefix) + std::string(protocol::kServiceKvstore) + "/";
// Where a snapshot names its stack: the one key under that prefix the server refuses to any client
// (a status/kvstore/<other> written by a peer without security names nothing).
const std::string kServerStatusKey = protocol::status_key(protocol::kServiceKvstore, ServerOptions().status_name);

}  // namespace

Agent::Agent(const ClientOptions& options, Replica& replica, ClientStatus& status, CommandQueue& commands)
    : options_(options),
      replica_(replica),
      status_(status),
      commands_(commands),
      silence_(std::chrono::milliseconds(options.heartbeat_ms) * options.silence_heartbeats),
      full_tree_(options.subtree.empty()),
      servers_(server_addresses(options)),
      publishers_(servers_.size()),
      current_(first_server_index(options)) {
  status_.set_server(servers_[current_].text());
}

void Agent::run() noexcept {
  while (true) {
    try {
      loop();
      break;
    } catch (const std::exception& error) {
      log(std::string("agent error: ") + error.what() + "; reconnecting after one heartbeat");
    }
    if (closing_) break;
    try {
      // Back off before reconnecting (a persistent error must not spin), but stay closable.
      zmq_pollitem_t doorbell{nullptr, commands_.fd(), ZMQ_POLLIN, 0};
      zmq::poll(&doorbell, 1, std::chrono::milliseconds(options_.heartbeat_ms));
    } catch (const zmq::error_t&) {
      // EINTR: reconnect at once
    }
  }
  try {
    disconnect();
  } catch (const std::exception& error) {
    log(std::string("closing the sockets failed: ") + error.what());
  }
  status_.set_state(ClientState::kClosed);
}

void Agent::log(const std::string& message) const {
  if (options_.log) options_.log(message);
}

void Agent::warn(const std::string& message) const {
  if (options_.warn) {
    options_.warn(message);
  } else {
    log(message);
  }
}

void Agent::learn_stack(const std::string& id) {
  if (id.empty() || id == stack_.id) return;  // a server that names no stack changes nothing
  const std::string previous = stack_.id;
  stack_.id = id;
  if (stack_.first.empty()) stack_.first = id;
  status_.set_stack(stack_);
  if (previous.empty()) {
    log("stack " + id);
  } else if (stack_.changed()) {
    warn("the kvstore at " + endpoint(0) + " is stack " + id + ", not stack " + previous + " of the last sync" +
         (previous != stack_.first ? " (this client joined stack " + stack_.first + ")" : std::string()) +
         ": it restarted without its log (a new, empty stack) or another stack's kvstore answers on these ports; "
         "re-registering (statuses say stack_changed " + stack_.first + ")");
  } else {
    warn("the kvstore at " + endpoint(0) + " is stack " + id + " again, the stack this client joined, after stack " +
         previous + "; re-registering");
  }
  for (auto& [key, own] : own_) stamp(key, own.value);  // sent again by the sync's republication
}

void Agent::stamp(const std::string& key, std::string& value) {
  if (!starts_with(key, protocol::kStatusPrefix) || starts_with(key, kServerStatusPrefix)) return;
  try {
    protocol::ServiceStatus status = protocol::ServiceStatus::decode(value);
    set_stack_fields(status, stack_);
    if (pair() && synced_server_ < servers_.size()) {
      status.extra[std::string(kServerField)] = servers_[synced_server_].text();
    }
    value = status.encode();
  } catch (const std::exception& error) {
    // Sent as written: a status that does not decode is its reader's to report (BadEntries).
    if (error_kinds_logged_.insert("stamp").second) {
      log("the status '" + key + "' is sent without its stack fields (logged once): " + error.what());
    }
  }
}

std::string Agent::endpoint(int offset) const { return endpoint(current_, offset); }

std::string Agent::endpoint(std::size_t server, int offset) const {
  return "tcp://" + servers_[server].host + ":" + std::to_string(servers_[server].port + offset);
}

void Agent::enter(ClientState state) {
  if (state == state_) return;
  state_ = state;
  status_.set_state(state);
}

void Agent::connect() {
  // Said once per outage, not at every retry while the server stays away.
  const bool announce = state_ != ClientState::kConnecting || !snapshot_;
  disconnect();
  publisher_full_ = false;
  silence_deadline_ = Clock::now() + silence_;
  enter(ClientState::kConnecting);
  if (announce) log("connecting to " + endpoint(0) + " (subtree '" + options_.subtree + "')");
  try {
    open_readers();
    for (std::size_t server = 0; server < servers_.size(); ++server) {
      Publisher& publisher = publishers_[server];
      publisher.socket.emplace(context_, zmq::socket_type::xpub);
      publisher.socket->set(zmq::sockopt::linger, 0);
      publisher.socket->set(zmq::sockopt::maxmsgsize, max_frame_bytes(options_.max_value_bytes));
      publisher.socket->set(zmq::sockopt::xpub_verbose, 1);  // hear every (re)subscription of the server
      publisher.socket->set(zmq::sockopt::xpub_nodrop, 1);   // a full queue refuses writes instead of losing them
      publisher.socket->set(zmq::sockopt::sndhwm, kPublisherHwm);
      security::apply(*publisher.socket, options_.curve);
      publisher.socket->connect(endpoint(server, 2));
    }
  } catch (const zmq::error_t& error) {
    log("cannot connect to " + endpoint(0) + ": " + error.what() + "; retrying");
    disconnect();
  }
}

void Agent::open_readers() {
  subscriber_.reset();
  subscriber_.emplace(context_, zmq::socket_type::sub);
  subscriber_->set(zmq::sockopt::linger, 0);
  subscriber_->set(zmq::sockopt::maxmsgsize, max_frame_bytes(options_.max_value_bytes));
  subscriber_->set(zmq::sockopt::subscribe, options_.subtree);
  if (!full_tree_) subscriber_->set(zmq::sockopt::subscribe, std::string(kHeartbeat));
  security::apply(*subscriber_, options_.curve);
  subscriber_->connect(endpoint(1));
  open_snapshot_socket();
}

void Agent::move_on() {
  const std::size_t next = (current_ + 1) % servers_.size();
  // Once per move; while neither server answers, the first move of the outage says it.
  const bool heard = state_ != ClientState::kConnecting;
  if (heard || !last_move_unheard_) {
    std::ostringstream seconds;
    seconds << std::chrono::duration<double>(silence_).count();
    log("kvstore at " + servers_[current_].text() + " silent for " + seconds.str() + " s: moving to " +
        servers_[next].text());
  }
  last_move_unheard_ = !heard;
  status_.count([](ClientStats& s) {
    ++s.server_moves;
    ++s.resyncs;
  });
  current_ = next;
  status_.set_server(servers_[current_].text());
  publisher_full_ = false;
  silence_deadline_ = Clock::now() + silence_;
  enter(ClientState::kConnecting);
  try {
    open_readers();
  } catch (const zmq::error_t& error) {
    log("cannot connect to " + endpoint(0) + ": " + error.what() + "; retrying");
    disconnect();
  }
}

void Agent::open_snapshot_socket() {
  snapshot_.reset();
  snapshot_.emplace(context_, zmq::socket_type::dealer);
  snapshot_->set(zmq::sockopt::linger, 0);
  snapshot_->set(zmq::sockopt::maxmsgsize, max_frame_bytes(options_.max_value_bytes));
  security::apply(*snapshot_, options_.curve);
  snapshot_->connect(endpoint(0));
}

void Agent::disconnect() {
  snapshot_.reset();
  subscriber_.reset();
  for (Publisher& publisher : publishers_) publisher = Publisher{};
}

void Agent::loop() {
  connect();
  while (true) {
    std::vector<zmq_pollitem_t> items{{nullptr, commands_.fd(), ZMQ_POLLIN, 0}};
    if (subscriber_) {
      items.push_back({subscriber_->handle(), 0, ZMQ_POLLIN, 0});
      items.push_back({snapshot_->handle(), 0, ZMQ_POLLIN, 0});
      for (std::size_t server = 0; server < publishers_.size(); ++server) {
        const bool wait_writable = publisher_full_ && server == current_;
        const short events = static_cast<short>(ZMQ_POLLIN | (wait_writable ? ZMQ_POLLOUT : 0));
        if (publishers_[server].socket) items.push_back({publishers_[server].socket->handle(), 0, events, 0});
      }
    }
    const auto timeout =
        std::chrono::ceil<std::chrono::milliseconds>(std::max(wake_time() - Clock::now(), Clock::duration{}));
    try {
      zmq::poll(items, timeout);
    } catch (const zmq::error_t& error) {
      if (error.num() != EINTR) throw;
    }
    guarded("command", [this] { handle_commands(); });
    if (subscriber_) {
      for (std::size_t server = 0; server < publishers_.size(); ++server) {
        guarded("subscription", [this, server] { handle_subscriptions(server); });
      }
      for (int i = 0; i < kBatch && subscriber_ && readable(*subscriber_); ++i) {
        guarded("update", [this] {
          if (auto msg = receive(*subscriber_)) handle_published(*msg);
        });
      }
      for (int i = 0; i < kBatch && snapshot_ && readable(*snapshot_); ++i) {
        guarded("snapshot", [this] {
          if (auto msg = receive(*snapshot_)) handle_snapshot(*msg);
        });
      }
    }
    const auto now = Clock::now();
    if (state_ == ClientState::kSyncing && now >= sync_deadline_ && now < silence_deadline_) {
      // The server is alive (HUGZ keep coming) but our snapshot stopped: the server dropped it
      // (server.hpp) or it was lost. Ask again on a new socket, so that whatever of the old reply
      // is still on its way goes with the old one and cannot end the new snapshot.
      open_snapshot_socket();
      resync("no snapshot message for " + std::to_string(options_.silence_heartbeats) +
             " heartbeats while the server is alive");
    }
    if (now >= silence_deadline_) {
      if (pair() && subscriber_) {
        move_on();
      } else if (state_ == ClientState::kConnecting && subscriber_) {
        // Nothing was heard since these sockets were made: libzmq keeps retrying their connections
        // by itself, and new sockets would only cut off a handshake under way (which a secured
        // server counts as a refused peer). Sockets that could not be made are made again.
        silence_deadline_ = now + silence_;
      } else {
        log("no message from the server for " + std::to_string(options_.silence_heartbeats) +
            " heartbeats: reconnecting");
        status_.count([](ClientStats& s) { ++s.resyncs; });
        connect();
      }
    }
    flush(now);
    if (closing_ && ((!one_shot_pending() && !publisher_handshaking()) || now >= closing_deadline_)) {
      goodbye();
      return;
    }
  }
}

Agent::Clock::time_point Agent::wake_time() const {
  Clock::time_point wake = silence_deadline_;
  if (state_ == ClientState::kSyncing) wake = std::min(wake, sync_deadline_);
  if (closing_) wake = std::min(wake, closing_deadline_);
  if (current_publisher().subscriptions > 0 && !publisher_full_ && !refresh_.empty()) {
    wake = std::min(wake, refresh_.begin()->first);
  }
  return wake;
}

void Agent::handle_commands() {
  for (Command& command : commands_.take()) {
    const std::uint64_t order = next_order_++;
    switch (command.kind) {
      case Command::Kind::kSet: {
        const auto [found, is_new] = own_.try_emplace(command.key);
        OwnKey& own = found->second;
        if (!is_new) pending_.erase(own.order);  // an unsent older value of this key is replaced
        own.value = std::move(command.value);
        stamp(command.key, own.value);
        own.ttl_s = command.ttl_s;
        own.order = order;
        pending_[order] = Pending{std::move(command.key), std::nullopt};
        break;
      }
      case Command::Kind::kSetOnce: {
        KvMsg msg;
        msg.key = command.key;
        msg.body = std::move(command.value);
        stamp(msg.key, msg.body);
        msg.set_ttl_s(command.ttl_s);
        if (command.create) msg.properties[std::string(kCreateProperty)] = "1";
        pending_[order] = Pending{std::move(command.key), std::move(msg)};
        break;
      }
      case Command::Kind::kErase: {
        if (const auto own = own_.find(command.key); own != own_.end()) {
          pending_.erase(own->second.order);
          own_.erase(own);
        }
        KvMsg msg;
        msg.key = command.key;
        pending_[order] = Pending{std::move(command.key), std::move(msg)};
        break;
      }
      case Command::Kind::kClose:
        closing_ = true;
        closing_deadline_ = Clock::now() + silence_;
        break;
    }
  }
}

void Agent::republish_own_keys() {
  for (const auto& [key, own] : own_) pending_.emplace(own.order, Pending{key, std::nullopt});
}

bool Agent::publisher_handshaking() const {
  // Synced, so the server is there, but its collector has not subscribed through our publisher yet:
  // that connection's handshake is still under way. Closing now would cut it off, and a secured
  // server counts a cut-off handshake as a refused peer: a short-lived client waits for it.
  return state_ == ClientState::kActive && current_publisher().socket && current_publisher().subscriptions == 0;
}

bool Agent::one_shot_pending() const {
  return std::any_of(pending_.begin(), pending_.end(), [](const auto& entry) { return entry.second.once.has_value(); });
}

void Agent::guarded(const char* kind, const std::function<void()>& handle) {
  try {
    handle();
  } catch (const std::exception& error) {
    status_.count([](ClientStats& s) { ++s.errors; });
    if (error_kinds_logged_.insert(kind).second) {
      log(std::string("handling a ") + kind + " failed (counted in errors, logged once): " + error.what());
    }
  }
}

std::optional<KvMsg> Agent::receive(zmq::socket_t& socket) {
  if (recv_frames(socket, parts_, kKvmsgFrames + 1) == 0) return std::nullopt;
  try {
    return decode_kvmsg(frame_views(parts_));
  } catch (const KvstoreError& error) {
    status_.count([](ClientStats& s) { ++s.malformed; });
    if (error_kinds_logged_.insert("malformed").second) {
      log(std::string("dropped a malformed message from the server (counted in malformed, logged once): ") +
          error.what());
    }
    return std::nullopt;
  }
}

// An XPUB's input: 0x01 + topic when its server's collector subscribes, 0x00 when it goes away.
void Agent::handle_subscriptions(std::size_t server) {
  Publisher& publisher = publishers_[server];
  while (publisher.socket && readable(*publisher.socket)) {
    zmq::message_t message;
    if (!publisher.socket->recv(message, zmq::recv_flags::dontwait)) break;
    if (message.size() == 0) continue;
    if (message.data<unsigned char>()[0] == 0) {
      publisher.subscriptions = std::max(0, publisher.subscriptions - 1);
      continue;
    }
    ++publisher.subscriptions;
    if (server != current_) {
      // The other server of the pair (re)started: it gets this client's own keys at once, the
      // current one does not need them again.
      if (publisher.seen && !own_.empty()) {
        log("republishing " + std::to_string(own_.size()) + " own keys to " + servers_[server].text());
      }
      publisher.seen = true;
      for (const auto& [key, own] : own_) {
        KvMsg msg;
        msg.key = key;
        msg.body = own.value;
        msg.set_ttl_s(own.ttl_s);
        msg.uuid = new_uuid();
        mirror(server, msg);
      }
      continue;
    }
    republish_own_keys();
    if (publisher.seen && state_ != ClientState::kConnecting) resync("the server subscribed again (it restarted)");
    if (publisher.seen && !own_.empty()) log("republishing " + std::to_string(own_.size()) + " own keys");
    publisher.seen = true;
  }
}

void Agent::mirror(std::size_t server, const KvMsg& msg) {
  Publisher& publisher = publishers_[server];
  if (!publisher.socket || publisher.subscriptions == 0) return;  // it resyncs from the active when it comes
  if (!send_kvmsg(*publisher.socket, msg, {}, zmq::send_flags::dontwait)) {
    status_.count([](ClientStats& s) { ++s.unmirrored; });
    if (error_kinds_logged_.insert("unmirrored").second) {
      log("the kvstore at " + servers_[server].text() + " takes no more writes (its queue is full): writes it "
          "misses are counted in unmirrored (logged once)");
    }
  }
}

void Agent::handle_published(const KvMsg& msg) {
  // A pair's passive publishes HUGZ too: while syncing only the snapshot proves the server serves,
  // and a HUGZ that says passive never does (a server that turned passive under a synced client, a
  // partial replica above all, which sees no sequence gap: it must leave, not stay frozen there).
  const bool passive = msg.key == kHeartbeat && msg.body == kPassiveHeartbeat;
  if (!passive && !(pair() && state_ == ClientState::kSyncing)) silence_deadline_ = Clock::now() + silence_;
  switch (state_) {
    case ClientState::kConnecting:
      // Our subscription is live: every update after the snapshot will reach us.
      resync("");
      break;
    case ClientState::kSyncing:
      if (msg.key != kHeartbeat) buffered_.push_back(msg);
      break;
    case ClientState::kActive:
      apply_published(msg);
      break;
    case ClientState::kClosed:
      break;
  }
}

void Agent::resync(const std::string& why) {
  if (!why.empty()) {
    log(why + ": resyncing");
    status_.count([](ClientStats& s) { ++s.resyncs; });
  }
  snapshot_entries_.clear();
  buffered_.clear();
  snapshot_stack_.clear();
  sync_deadline_ = Clock::now() + silence_;
  const std::vector<zmq::const_buffer> request{zmq::buffer(kSnapshotRequest), zmq::buffer(options_.subtree)};
  if (!zmq::send_multipart(*snapshot_, request, zmq::send_flags::dontwait)) {
    log("snapshot request not sent (no connection yet); retrying after the silence period");
  }
  enter(ClientState::kSyncing);
}

void Agent::handle_snapshot(const KvMsg& msg) {
  silence_deadline_ = Clock::now() + silence_;
  if (state_ != ClientState::kSyncing) return;  // a late reply to an abandoned request
  sync_deadline_ = silence_deadline_;
  if (msg.key != kSnapshotEnd) {
    if (!msg.body.empty() && msg.key == kServerStatusKey) {
      // Sent whatever the subtree (server.hpp). One that does not decode names no stack.
      try {
        snapshot_stack_ = stack_id_of(protocol::ServiceStatus::decode(msg.body));
      } catch (const std::exception&) {
        snapshot_stack_.clear();
      }
    }
    if (!msg.body.empty() && in_subtree(msg.key)) snapshot_entries_[msg.key] = msg.body;
    return;
  }
  const std::size_t keys = snapshot_entries_.size();
  sequence_ = msg.sequence;
  replica_.replace(std::exchange(snapshot_entries_, {}), sequence_);
  status_.count([](ClientStats& s) { ++s.snapshots; });
  log("synced: " + std::to_string(keys) + " keys at sequence " + std::to_string(sequence_) +
      (pair() ? " from " + servers_[current_].text() : std::string()));
  const bool moved = synced_server_ != current_;
  synced_server_ = current_;
  learn_stack(snapshot_stack_);  // before active: who waited for the sync reads the stack
  if (pair() && moved) {
    for (auto& [key, own] : own_) stamp(key, own.value);  // says the new server; sent by the republication
  }
  enter(ClientState::kActive);
  republish_own_keys();  // the server may have lost them; a new stack surely did
  for (const KvMsg& update : std::exchange(buffered_, {})) {
    if (state_ != ClientState::kActive) break;  // a gap in the buffer started another resync
    if (update.sequence > sequence_) apply_published(update);
  }
}

void Agent::apply_published(const KvMsg& msg) {
  if (msg.key == kHeartbeat) {
    if (msg.sequence < sequence_) {
      resync("the server's sequence went back from " + std::to_string(sequence_) + " to " +
             std::to_string(msg.sequence) + " (it restarted)");
    } else if (msg.sequence > sequence_) {
      if (full_tree_) {
        resync("missed updates " + std::to_string(sequence_ + 1) + " to " + std::to_string(msg.sequence));
      } else {
        sequence_ = msg.sequence;  // the updates in between were outside our subtree
        replica_.advance(sequence_);
      }
    }
    return;
  }
  if (msg.sequence <= sequence_) {
    status_.count([](ClientStats& s) { ++s.stale; });
    return;
  }
  if (full_tree_ && msg.sequence != sequence_ + 1) {
    resync("missed updates " + std::to_string(sequence_ + 1) + " to " + std::to_string(msg.sequence - 1));
    return;
  }
  sequence_ = msg.sequence;
  if (in_subtree(msg.key)) {
    replica_.apply(msg.key, msg.body, sequence_);
    status_.count([](ClientStats& s) { ++s.updates; });
  } else {
    replica_.advance(sequence_);
  }
}

bool Agent::in_subtree(const std::string& key) const {
  return key.compare(0, options_.subtree.size(), options_.subtree) == 0;
}

bool Agent::send(KvMsg msg, zmq::send_flags flags) {
  msg.uuid = new_uuid();  // one uuid on both servers: a pair's passive matches it to the active's update
  if (!send_kvmsg(*current_publisher().socket, msg, {}, flags)) return false;
  status_.count([](ClientStats& s) { ++s.sent; });
  for (std::size_t server = 0; server < publishers_.size(); ++server) {
    if (server != current_) mirror(server, msg);
  }
  return true;
}

void Agent::flush(Clock::time_point now) {
  if (!current_publisher().socket || current_publisher().subscriptions == 0) return;
  publisher_full_ = false;
  const auto send_own = [this, now](const std::string& key, OwnKey& own) {
    KvMsg msg;
    msg.key = key;
    msg.body = own.value;
    msg.set_ttl_s(own.ttl_s);
    if (!send(std::move(msg))) return false;
    if (own.ttl_s > 0.0) {
      own.next_refresh = now + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(own.ttl_s / kRefreshesPerTtl));
      refresh_.emplace(own.next_refresh, key);
    }
    return true;
  };
  for (auto it = pending_.begin(); it != pending_.end(); it = pending_.erase(it)) {
    Pending& pending = it->second;
    const auto own = own_.find(pending.key);
    const bool sent = pending.once ? send(*pending.once) : own == own_.end() || send_own(own->first, own->second);
    if (!sent) {
      publisher_full_ = true;  // keep the rest, in order, for when the XPUB drains
      return;
    }
  }
  while (!refresh_.empty() && refresh_.begin()->first <= now) {
    const auto [due, key] = *refresh_.begin();
    const auto own = own_.find(key);
    // Skip entries left behind by a later send or an erase of the key.
    if (own != own_.end() && own->second.ttl_s > 0.0 && own->second.next_refresh == due &&
        !send_own(key, own->second)) {
      publisher_full_ = true;
      return;
    }
    refresh_.erase(refresh_.begin());
  }
}

void Agent::goodbye() {
  if (!current_publisher().socket || current_publisher().subscriptions == 0) return;
  zmq::socket_t& publisher = *current_publisher().socket;
  // Block for room in the XPUB if needed, but no longer than one silence period in all.
  const auto deadline = Clock::now() + silence_;
  for (const auto& [key, own] : own_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    publisher.set(zmq::sockopt::sndtimeo, static_cast<int>(std::max<std::int64_t>(left, 0)));
    KvMsg deletion;
    deletion.key = key;
    if (!send(std::move(deletion), zmq::send_flags::none)) break;
  }
  // Let ZeroMQ deliver the goodbye before the context closes (bounded by one silence period).
  const int linger = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(silence_).count());
  for (Publisher& other : publishers_) {
    if (other.socket) other.socket->set(zmq::sockopt::linger, linger);
  }
}

}  // namespace sectorflow::kvstore::detail
