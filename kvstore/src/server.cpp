// The Server (server.hpp): its options' checks, its sockets, and its loop, which hands each socket's
// messages to the store (store.hpp, the Clone core) and, in a pair, to the pair's link
// (pair_link.hpp), as the Guide's clonesrv6 leaves the pair to its bstar reactor.
#include "sectorflow/kvstore/server.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "pair_link.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/stack_id.hpp"
#include "store.hpp"

namespace sectorflow::kvstore {
namespace {

using detail::Clock;

// How often waiting snapshot replies are offered to their peers' pipes again: ZeroMQ does not say
// when one peer's pipe has room.
constexpr auto kSnapshotRetry = std::chrono::milliseconds(5);

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
    if (o.curve.enabled() && detail::peer_link_curve(o.curve).peers.empty()) {
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
  Impl(ServerOptions options, std::unique_ptr<const StackPolicy> policy)
      : store(std::move(options), std::move(policy)) {}

  detail::Store store;
  std::optional<detail::PairLink> pair;  // a server of a pair; destroyed before the store's sockets
};

Server::Server(ServerOptions options) : Server(options, scan_stack_policy(options.producer_threads)) {}

Server::Server(ServerOptions options, std::unique_ptr<const StackPolicy> policy) {
  check_options(options);
  if (!policy) throw KvstoreError("kvstore server: no stack policy (a StackPolicy is required)");
  impl_ = std::make_unique<Impl>(std::move(options), std::move(policy));
  detail::Store& s = impl_->store;
  const std::int64_t max_frame = max_frame_bytes(s.options.max_value_bytes);
  for (zmq::socket_t* socket : {&s.snapshot, &s.publisher, &s.collector}) {
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::maxmsgsize, max_frame);
  }
  s.snapshot.set(zmq::sockopt::sndhwm, kSnapshotHwm);
  s.snapshot.set(zmq::sockopt::router_mandatory, 1);  // a full pipe is EAGAIN, not a silent drop
  s.publisher.set(zmq::sockopt::sndhwm, detail::kPublisherHwm);
  s.collector.set(zmq::sockopt::subscribe, "");
  if (s.options.pair.role != PairRole::kNone) {
    impl_->pair.emplace(s);
    s.gate = &*impl_->pair;
  }
  if (s.options.curve.enabled()) {
    std::vector<security::CurveServer> listeners{s.options.curve};
    std::vector<zmq::socket_t*> watched{&s.snapshot, &s.publisher, &s.collector};
    if (impl_->pair) {
      listeners.push_back(detail::peer_link_curve(s.options.curve));
      watched.push_back(&impl_->pair->pair_pub());
    }
    s.zap.emplace(s.context, listeners, watched);
    for (zmq::socket_t* socket : {&s.snapshot, &s.publisher, &s.collector}) security::apply(*socket, s.options.curve);
  }
  s.bind(s.snapshot, 0, "snapshot (ROUTER)");
  s.bind(s.publisher, 1, "publisher (PUB)");
  s.bind(s.collector, 2, "collector (SUB)");
  if (impl_->pair) impl_->pair->start();
  s.stack_id = new_stack_id();
  if (!s.options.log.dir.empty()) s.load_log();
}

Server::~Server() = default;

void Server::run() {
  detail::Store& s = impl_->store;
  detail::PairLink* const pair = impl_->pair ? &*impl_->pair : nullptr;
  if (s.serving()) s.guarded("status", [&s] { s.publish_status(); });
  if (pair != nullptr) s.guarded("pair", [pair] { pair->send_state(); });
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
    if (pair != nullptr) pair->poll_items(items);
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
    for (int i = 0; i < detail::kBatch && (items[0].revents & ZMQ_POLLIN); ++i) {
      if (!(s.snapshot.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      s.guarded("snapshot request", [&s] { s.handle_snapshot_request(); });
    }
    if (pair != nullptr) pair->on_readable(items);
    for (int i = 0; i < detail::kBatch && (items[1].revents & ZMQ_POLLIN); ++i) {
      if (!(s.collector.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      s.guarded("update", [&s] { s.handle_update(); });
      s.compact_if_due();
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
      if (pair != nullptr) s.guarded("pair", [pair, now] { pair->on_heartbeat(now); });
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
  impl_->store.state.store(state);
  impl_->store.wakeup.notify();
}

void Server::stop() noexcept {
  impl_->store.stop_requested.store(true);
  impl_->store.wakeup.notify();
}

ServerStats Server::stats() const {
  const detail::Store& s = impl_->store;
  const std::uint64_t unauthenticated = s.zap ? s.zap->stats().refused : 0;
  const std::lock_guard<std::mutex> lock(s.stats_mutex);
  ServerStats stats = s.stats;
  stats.unauthenticated = unauthenticated;
  return stats;
}

std::vector<std::string> Server::take_pair_events() {
  return impl_->pair ? impl_->pair->take_events() : std::vector<std::string>{};
}

std::vector<std::string> Server::take_security_refusals() {
  return impl_->store.zap ? impl_->store.zap->take_refusals() : std::vector<std::string>{};
}

const ServerOptions& Server::options() const { return impl_->store.options; }

const std::string& Server::stack_id() const { return impl_->store.stack_id; }

std::string Server::endpoint(int offset) const { return impl_->store.endpoint(offset); }

}  // namespace sectorflow::kvstore
