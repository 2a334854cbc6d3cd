#include "sectorflow/kvstore/server.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"
#include "sectorflow/kvstore/schema.hpp"
#include "sectorflow/kvstore/wakeup.hpp"

namespace sectorflow::kvstore {
namespace {

using Clock = std::chrono::steady_clock;

// Messages read from one socket per wakeup, so that a flood on one port cannot starve the other
// port, the heartbeat or the ttl expiry.
constexpr int kBatch = 256;
// Queued KVPUBs per subscriber before ZeroMQ drops (the subscriber then sees a gap and resyncs).
constexpr int kPublisherHwm = 100000;

struct Entry {
  KvMsg msg;
  std::optional<Clock::time_point> expires;
};

}  // namespace

struct Server::Impl {
  explicit Impl(ServerOptions opts) : options(std::move(opts)) {}

  ServerOptions options;
  zmq::context_t context{1};
  zmq::socket_t snapshot{context, zmq::socket_type::router};
  zmq::socket_t publisher{context, zmq::socket_type::pub};
  zmq::socket_t collector{context, zmq::socket_type::sub};
  Wakeup wakeup;
  std::atomic<bool> stop_requested{false};

  std::map<std::string, Entry> map;
  std::multimap<Clock::time_point, std::string> expiries;  // entries whose key was set again are skipped
  std::int64_t sequence = 0;
  std::string status_key = kvstore::status_key(kServiceKvstore, options.status_name);

  mutable std::mutex stats_mutex;
  ServerStats stats;
  std::optional<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>>
      published_counters;

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
  }

  void reject(const std::string& why) {
    count([&why](ServerStats& s) {
      ++s.malformed;
      s.last_malformed = why;
    });
  }

  void publish(KvMsg& msg) {
    msg.sequence = ++sequence;
    send_kvmsg(publisher, msg);
  }

  void handle_snapshot_request() {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(snapshot, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    const std::vector<std::string_view> frames = frame_views(parts);
    if (frames.size() != 3 || frames[1] != kSnapshotRequest) {
      reject("snapshot request: expected the 2 frames 'ICANHAZ?' and a subtree, got " +
             std::to_string(frames.size() - 1) + " frames" +
             (frames.size() > 1 ? " starting with '" + std::string(frames[1].substr(0, 20)) + "'" : ""));
      return;
    }
    const std::vector<std::string> identity{std::string(frames[0])};
    const std::string subtree(frames[2]);
    for (const auto& [key, entry] : map) {
      if (key.compare(0, subtree.size(), subtree) == 0) send_kvmsg(snapshot, entry.msg, identity);
    }
    KvMsg end;
    end.key = std::string(kSnapshotEnd);
    end.sequence = sequence;
    end.body = subtree;
    send_kvmsg(snapshot, end, identity);
    count([](ServerStats& s) { ++s.snapshots; });
  }

  void handle_update() {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(collector, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
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
    if (!msg.body.empty()) {
      try {
        check_msgpack(msg.body);
      } catch (const KvstoreError& error) {
        reject("update: kvmsg '" + msg.key + "': " + error.what());
        return;
      }
    }
    const std::size_t body_bytes = msg.body.size();
    if (msg.is_delete()) {
      if (map.erase(msg.key) != 0) publish(msg);
    } else {
      publish(msg);
      std::optional<Clock::time_point> expires;
      if (ttl_s > 0.0) {
        expires = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ttl_s));
      }
      std::string key = msg.key;  // not map[msg.key] = ...move(msg): the right side is evaluated first
      if (expires) expiries.emplace(*expires, key);
      map[std::move(key)] = Entry{std::move(msg), expires};
    }
    count([body_bytes](ServerStats& s) {
      ++s.updates;
      s.bytes += body_bytes;
    });
  }

  void expire(Clock::time_point now) {
    std::uint64_t expired = 0;
    for (auto next = next_expiry(); next && *next <= now; next = next_expiry()) {
      const auto entry = map.find(expiries.begin()->second);
      expiries.erase(expiries.begin());
      KvMsg deletion;
      deletion.key = entry->first;
      deletion.uuid = entry->second.msg.uuid;
      publish(deletion);
      map.erase(entry);
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
    const ServerStats now = [this] {
      const std::lock_guard<std::mutex> lock(stats_mutex);
      return stats;
    }();
    const auto counters = std::make_tuple(now.updates, now.bytes, now.malformed, now.snapshots, now.expired,
                                          static_cast<std::uint64_t>(map.size()));
    if (published_counters == counters) return;
    published_counters = counters;
    ServiceStatus status;
    status.state = std::string(kStateServing);
    status.messages = now.updates;
    status.bytes = now.bytes;
    status.updated_s = wall_clock_s();
    status.extra["malformed"] = static_cast<std::int64_t>(now.malformed);
    status.extra["snapshots"] = static_cast<std::int64_t>(now.snapshots);
    status.extra["expired"] = static_cast<std::int64_t>(now.expired);
    status.extra["keys"] = static_cast<std::int64_t>(map.size());
    KvMsg msg;
    msg.key = status_key;
    msg.uuid = new_uuid();
    msg.body = status.encode();
    publish(msg);
    map[status_key] = Entry{std::move(msg), std::nullopt};
    count([](ServerStats&) {});
  }

  void heartbeat() {
    KvMsg hugz;
    hugz.key = std::string(kHeartbeat);
    hugz.sequence = sequence;
    send_kvmsg(publisher, hugz);
  }
};

Server::Server(ServerOptions options) {
  if (options.bind_host.empty()) throw KvstoreError("kvstore server: no interface to bind (bind_host is empty)");
  if (options.port == 0 || options.port > 65533) {
    throw KvstoreError("kvstore server: port " + std::to_string(options.port) +
                       " out of range; the server uses P, P + 1 and P + 2, so P must be from 1 to 65533");
  }
  if (options.heartbeat_ms == 0) throw KvstoreError("kvstore server: heartbeat of 0 ms; expected at least 1 ms");
  impl_ = std::make_unique<Impl>(std::move(options));
  Impl& s = *impl_;
  for (zmq::socket_t* socket : {&s.snapshot, &s.publisher, &s.collector}) socket->set(zmq::sockopt::linger, 0);
  s.snapshot.set(zmq::sockopt::sndhwm, 0);  // a snapshot is never cut short; the pipe dies with its peer
  s.publisher.set(zmq::sockopt::sndhwm, kPublisherHwm);
  s.collector.set(zmq::sockopt::subscribe, "");
  s.bind(s.snapshot, 0, "snapshot (ROUTER)");
  s.bind(s.publisher, 1, "publisher (PUB)");
  s.bind(s.collector, 2, "collector (SUB)");
}

Server::~Server() = default;

void Server::run() {
  Impl& s = *impl_;
  s.publish_status();
  auto next_heartbeat = Clock::now() + std::chrono::milliseconds(s.options.heartbeat_ms);
  while (!s.stop_requested.load()) {
    auto wake = next_heartbeat;
    if (const auto expiry = s.next_expiry(); expiry && *expiry < wake) wake = *expiry;
    const auto timeout = std::chrono::ceil<std::chrono::milliseconds>(std::max(wake - Clock::now(), Clock::duration{}));
    zmq_pollitem_t items[] = {{s.snapshot.handle(), 0, ZMQ_POLLIN, 0},
                              {s.collector.handle(), 0, ZMQ_POLLIN, 0},
                              {nullptr, s.wakeup.fd(), ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 3, timeout);
    } catch (const zmq::error_t& error) {
      if (error.num() != EINTR) throw;
      continue;  // a signal: look at stop_requested again
    }
    if (items[2].revents & ZMQ_POLLIN) s.wakeup.drain();
    for (int i = 0; i < kBatch && (items[0].revents & ZMQ_POLLIN); ++i) {
      if (!(s.snapshot.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      s.handle_snapshot_request();
    }
    for (int i = 0; i < kBatch && (items[1].revents & ZMQ_POLLIN); ++i) {
      if (!(s.collector.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      s.handle_update();
    }
    const auto now = Clock::now();
    s.expire(now);
    if (now >= next_heartbeat) {
      s.publish_status();
      s.heartbeat();
      next_heartbeat = now + std::chrono::milliseconds(s.options.heartbeat_ms);
    }
  }
}

void Server::stop() noexcept {
  impl_->stop_requested.store(true);
  impl_->wakeup.notify();
}

ServerStats Server::stats() const {
  const std::lock_guard<std::mutex> lock(impl_->stats_mutex);
  return impl_->stats;
}

const ServerOptions& Server::options() const { return impl_->options; }

std::string Server::endpoint(int offset) const { return impl_->endpoint(offset); }

}  // namespace sectorflow::kvstore
