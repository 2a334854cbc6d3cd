#include "sectorflow/kvstore/client.hpp"

#include <cmath>
#include <thread>

#include "agent.hpp"
#include "client_status.hpp"
#include "commands.hpp"
#include "replica.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"
#include "sectorflow/protocol/worker_thread.hpp"
#include "sectorflow/security/certificate.hpp"

namespace sectorflow::kvstore {

const char* to_string(ClientState state) {
  switch (state) {
    case ClientState::kConnecting: return "connecting";
    case ClientState::kSyncing: return "syncing";
    case ClientState::kActive: return "active";
    case ClientState::kClosed: return "closed";
  }
  return "unknown";
}

struct Client::Impl {
  explicit Impl(ClientOptions opts)
      : options(std::move(opts)), replica([this](const std::string& message) {
          if (options.log) options.log(message);
        }) {}

  ClientOptions options;
  detail::Replica replica;
  detail::ClientStatus status;
  detail::CommandQueue commands;
  std::unique_ptr<detail::Agent> agent;
  std::thread thread;
  std::mutex close_mutex;
};

namespace {

void check_value(const ClientOptions& options, const std::string& key, const std::string& value, double ttl_s) {
  check_key(key);
  if (value.empty()) throw KvstoreError("kvstore set '" + key + "': empty value; use erase() to delete a key");
  try {
    check_msgpack(value);
  } catch (const KvstoreError& error) {
    throw KvstoreError("kvstore set '" + key + "': " + error.what() + "; values are msgpack bytes");
  }
  if (!std::isfinite(ttl_s) || ttl_s < 0.0) {
    throw KvstoreError("kvstore set '" + key + "': ttl_s " + std::to_string(ttl_s) +
                       " is not a number of seconds >= 0 (0: no expiry)");
  }
  if (value.size() > options.max_value_bytes) {
    throw KvstoreError("kvstore set '" + key + "': value of " + std::to_string(value.size()) + " bytes, the server " +
                       "takes at most " + std::to_string(options.max_value_bytes) + " ([kvstore] max_value_bytes)");
  }
  if (ttl_s > options.max_ttl_s) {
    throw KvstoreError("kvstore set '" + key + "': ttl_s " + std::to_string(ttl_s) + " is above the server's " +
                       "max_ttl_s " + std::to_string(options.max_ttl_s) + " ([kvstore] max_ttl_s)");
  }
}

// The server uses P, P + 1 and P + 2.
constexpr unsigned kMaxPort = 65533;

}  // namespace

std::vector<ServerAddress> server_addresses(const ClientOptions& options) {
  if (options.servers.empty()) {
    if (options.host.empty()) throw KvstoreError("kvstore client: no server host given ([kvstore] host)");
    if (options.port == 0 || options.port > kMaxPort) {
      throw KvstoreError("kvstore client: port " + std::to_string(options.port) +
                         " out of range; the server uses P, P + 1 and P + 2, so P must be from 1 to 65533 "
                         "([kvstore] port)");
    }
    return {ServerAddress{options.host, options.port}};
  }
  if (options.servers.size() > kMaxServers) {
    throw KvstoreError("kvstore client: " + std::to_string(options.servers.size()) +
                       " servers given: a kvstore pair (Binary Star) is a primary and a backup, so at most " +
                       std::to_string(kMaxServers) + " ([kvstore] servers)");
  }
  std::vector<ServerAddress> addresses;
  for (std::size_t i = 0; i < options.servers.size(); ++i) {
    const std::string& text = options.servers[i];
    const std::string where = "kvstore client: server " + std::to_string(i) + " '" + text + "'";
    const std::size_t colon = text.rfind(':');
    const std::string digits = colon == std::string::npos ? std::string() : text.substr(colon + 1);
    if (colon == std::string::npos || colon == 0 || digits.empty() || digits.size() > 5 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      throw KvstoreError(where + ": expected \"host:port\" (a server's address and its snapshot port P; "
                         "[kvstore] servers)");
    }
    const unsigned long port = std::stoul(digits);
    if (port == 0 || port > kMaxPort) {
      throw KvstoreError(where + ": port " + digits + " out of range: expected 1 to 65533 (the server uses P, P + 1 "
                         "and P + 2; [kvstore] servers)");
    }
    ServerAddress address{text.substr(0, colon), static_cast<std::uint16_t>(port)};
    for (const ServerAddress& earlier : addresses) {
      if (earlier.text() == address.text()) {
        throw KvstoreError(where + " is listed twice: the pair is two different servers ([kvstore] servers)");
      }
    }
    addresses.push_back(std::move(address));
  }
  return addresses;
}

std::size_t first_server_index(const ClientOptions& options) {
  if (options.first_server.empty()) return 0;
  const std::vector<ServerAddress> addresses = server_addresses(options);
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    if (addresses[i].text() == options.first_server) return i;
  }
  throw KvstoreError("kvstore client: first server '" + options.first_server + "' is not one of the servers " +
                     "configured ([kvstore] servers, or host:port)");
}

Client::Client(ClientOptions options) {
  first_server_index(options);  // refuses an address it cannot use, naming it
  if (options.heartbeat_ms == 0 || options.silence_heartbeats <= 0) {
    throw KvstoreError("kvstore client: heartbeat " + std::to_string(options.heartbeat_ms) +
                       " ms and silence_heartbeats " + std::to_string(options.silence_heartbeats) +
                       " must both be positive ([kvstore] heartbeat_ms and silence_heartbeats)");
  }
  if (options.max_value_bytes < kMaxKeyBytes || options.max_value_bytes > (std::size_t{1} << 30)) {
    throw KvstoreError("kvstore client: max_value_bytes " + std::to_string(options.max_value_bytes) +
                       " out of range; expected " + std::to_string(kMaxKeyBytes) +
                       " to 2^30 ([kvstore] max_value_bytes, the server's)");
  }
  if (!(options.max_ttl_s > 0.0) || !(options.max_ttl_s <= kTtlCeilingS)) {
    throw KvstoreError("kvstore client: max_ttl_s " + std::to_string(options.max_ttl_s) +
                       " out of range; expected more than 0 and at most 1e9 seconds ([kvstore] max_ttl_s, the "
                       "server's)");
  }
  if (options.curve.enabled()) {
    for (const std::string* key : {&options.curve.public_key, &options.curve.secret_key, &options.curve.server_key}) {
      if (!security::is_z85_key(*key)) {
        throw KvstoreError("kvstore client: a CURVE key is not a Z85 key of 40 characters ([security] key_dir)");
      }
    }
  }
  impl_ = std::make_unique<Impl>(std::move(options));
  impl_->agent = std::make_unique<detail::Agent>(impl_->options, impl_->replica, impl_->status, impl_->commands);
  impl_->thread = protocol::start_worker_thread("sf-kvstore", [agent = impl_->agent.get()] { agent->run(); });
}

Client::~Client() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; close() only fails if the thread cannot be joined.
  }
}

void Client::close() {
  const std::lock_guard<std::mutex> lock(impl_->close_mutex);
  if (!impl_->thread.joinable()) return;
  if (!impl_->commands.closed()) impl_->commands.push({detail::Command::Kind::kClose, {}, {}, 0.0});
  impl_->thread.join();
  impl_->agent.reset();  // closes the context, after the goodbye has left
}

void Client::set(const std::string& key, std::string value, double ttl_s) {
  check_value(impl_->options, key, value, ttl_s);
  impl_->commands.push({detail::Command::Kind::kSet, key, std::move(value), ttl_s});
}

void Client::set_once(const std::string& key, std::string value, double ttl_s) {
  check_value(impl_->options, key, value, ttl_s);
  impl_->commands.push({detail::Command::Kind::kSetOnce, key, std::move(value), ttl_s});
}

void Client::create_once(const std::string& key, std::string value, double ttl_s) {
  check_value(impl_->options, key, value, ttl_s);
  impl_->commands.push({detail::Command::Kind::kSetOnce, key, std::move(value), ttl_s, true});
}

void Client::erase(const std::string& key) {
  check_key(key);
  impl_->commands.push({detail::Command::Kind::kErase, key, {}, 0.0});
}

std::optional<std::string> Client::get(const std::string& key) const { return impl_->replica.get(key); }

std::map<std::string, std::string> Client::subtree(const std::string& prefix) const {
  return impl_->replica.subtree(prefix);
}

std::int64_t Client::sequence() const { return impl_->replica.sequence(); }

ClientState Client::state() const { return impl_->status.state(); }

bool Client::synced() const { return impl_->status.state() == ClientState::kActive; }

bool Client::wait_synced(std::chrono::milliseconds timeout) const { return impl_->status.wait_active(timeout); }

ClientStats Client::stats() const { return impl_->status.stats(); }

StackIdentity Client::stack() const { return impl_->status.stack(); }

std::string Client::server() const { return impl_->status.server(); }

const ClientOptions& Client::options() const { return impl_->options; }

std::uint64_t Client::on_change(const std::string& prefix, ChangeCallback callback) {
  if (!callback) throw KvstoreError("kvstore on_change('" + prefix + "'): empty callback");
  return impl_->replica.add_callback(prefix, std::move(callback));
}

void Client::remove_callback(std::uint64_t id) { impl_->replica.remove_callback(id); }

}  // namespace sectorflow::kvstore
