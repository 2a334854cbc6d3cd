// The kvstore server: the Clone pattern's server (ZeroMQ Guide, chapter 5, CHP; see kvmsg.hpp for
// the frames). It holds the map and the sequence and binds three sockets on consecutive ports:
//
//   P     ROUTER  snapshots: ["ICANHAZ?", subtree] is answered with one KVSYNC per key starting
//                 with the subtree, then KTHXBAI carrying the current sequence and the subtree
//   P + 1 PUB     every accepted update (KVPUB, a new sequence each), and HUGZ every heartbeat
//                 carrying the current sequence
//   P + 2 SUB     client updates (KVSET) from PUB sockets (the Guide's clone client) or XPUB
//                 sockets (sectorflow's Client); subscribed to everything
//
// A KVSET with a "ttl" property (seconds) expires unless set again in time; the expiry is published
// as a deletion (empty body). An empty body deletes the key. A message that is not a valid kvmsg,
// uses a command word as key, has a bad ttl or a body that is not one msgpack object is dropped and
// counted as malformed. The server publishes its own ServiceStatus under status/kvstore/<name>
// (extra fields: malformed, snapshots, expired, keys) at the first heartbeat after it changes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace sectorflow::kvstore {

struct ServerOptions {
  std::string bind_host;         ///< interface to bind ("0.0.0.0" for all)
  std::uint16_t port = 0;        ///< snapshot port P; P + 1 and P + 2 are used too
  std::uint32_t heartbeat_ms = 1000;  ///< HUGZ interval
  std::string status_name = "server";         ///< publishes status/kvstore/<status_name>
};

struct ServerStats {
  std::int64_t sequence = 0;    ///< sequence of the last published update
  std::uint64_t keys = 0;       ///< keys in the map
  std::uint64_t updates = 0;    ///< accepted KVSETs (sets, refreshes and deletions)
  std::uint64_t bytes = 0;      ///< body bytes of the accepted KVSETs
  std::uint64_t snapshots = 0;  ///< answered ICANHAZ? requests
  std::uint64_t expired = 0;    ///< keys deleted because their ttl ran out
  std::uint64_t malformed = 0;  ///< rejected messages on the snapshot and collector ports
  std::string last_malformed;   ///< why the last one was rejected
};

class Server {
 public:
  /// Binds the three sockets. Throws KvstoreError naming the address if one cannot be bound (port
  /// taken, unknown interface); nothing stays bound then.
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Serves until stop() is called, then returns; returns at once if stop() came first. Call it
  /// from one thread at a time. Throws zmq::error_t on an unexpected socket failure.
  void run();
  /// Makes run() return within one poll wakeup. Thread-safe and async-signal-safe.
  void stop() noexcept;

  /// A consistent copy of the counters; thread-safe.
  ServerStats stats() const;
  const ServerOptions& options() const;
  /// "tcp://<bind_host>:<port + offset>": offset 0 snapshots, 1 publisher, 2 collector.
  std::string endpoint(int offset) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sectorflow::kvstore
