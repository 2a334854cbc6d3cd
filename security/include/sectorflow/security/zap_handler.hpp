// The ZAP handler of one ZeroMQ context (ZeroMQ RFC 27): libzmq asks it, over
// inproc://zeromq.zap.01, whether the peer of each CURVE handshake on a socket of that context may
// connect. It answers from the allowlist of the socket's ZAP domain (CurveServer::peers): a known
// public key is accepted with its identity "<role>/<name>" as the ZAP User-Id, which libzmq then
// attaches to every message from that peer ("User-Id" metadata); anything else (an unknown key,
// another mechanism, an unknown domain) is refused, counted, and reported once per key.
//
// A peer that fails the handshake before the ZAP handler is asked (no key: it speaks another
// mechanism; or a CURVE client holding a wrong server key) is seen through socket monitors of the
// `watched` sockets: counted as refused too, and reported once per endpoint.
//
// Construct it before any socket of the context binds or connects with CURVE (without a handler
// libzmq lets every CURVE peer in), and destroy it before the context.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "sectorflow/security/curve.hpp"

namespace sectorflow::security {

struct ZapStats {
  std::uint64_t accepted = 0;  ///< handshakes allowed
  std::uint64_t refused = 0;   ///< handshakes refused (unknown key, wrong mechanism or domain)
  std::map<std::string, std::uint64_t> refused_by_domain;
};

class ZapHandler {
 public:
  /// Binds the ZAP endpoint of `context` and starts answering with the allowlists of `listeners`
  /// (one per domain; listeners that are off are skipped), and monitors the handshakes of
  /// `watched` (sockets of `context`, before they bind or connect, on the thread that owns them).
  /// Throws SecurityError if the context already has a handler.
  ZapHandler(zmq::context_t& context, const std::vector<CurveServer>& listeners,
             const std::vector<zmq::socket_t*>& watched = {});
  /// Stops the thread and closes its socket.
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  ZapStats stats() const;
  /// One line per public key refused for the first time since the last call (the key's public
  /// half, the domain and the peer's address): what the service logs, once per key.
  std::vector<std::string> take_refusals();

 private:
  void run();
  void answer();
  /// Reads one event of monitor `i`.
  void observe(std::size_t i);

  std::map<std::string, std::map<std::string, std::string>> allowlists_;  // domain -> key -> identity
  zmq::socket_t socket_;
  std::vector<zmq::socket_t> monitors_;  // PAIR ends of the watched sockets' monitors
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  ZapStats stats_;
  std::set<std::string> refused_keys_;  // and endpoints where a handshake failed before ZAP
  std::vector<std::string> new_refusals_;
  std::thread thread_;
};

}  // namespace sectorflow::security
