// CURVE on one socket (zmq_curve(7)). The CURVE roles are independent of bind and connect: the
// kvstore server and the aggregator are CURVE servers on every socket they own (bound or
// connected), so that they authenticate each peer through their ZAP handler; producers, NodeGroups
// and kvstore clients are CURVE clients that authenticate the server by its public key.
#pragma once

#include <map>
#include <string>
#include <zmq.hpp>

namespace sectorflow::security {

/// A socket that authenticates its peers: off when secret_key is empty.
struct CurveServer {
  std::string public_key;  ///< Z85 of this party's public key
  std::string secret_key;  ///< Z85 of its secret key; never logged
  std::string domain;      ///< ZAP domain: the allowlist of the ZAP handler the peers are checked against
  std::map<std::string, std::string> peers;  ///< allowed public keys (Z85) -> identity "<role>/<name>"

  bool enabled() const { return !secret_key.empty(); }
};

/// A socket that authenticates its server by its public key: off when secret_key is empty.
struct CurveClient {
  std::string public_key;  ///< Z85 of this party's public key
  std::string secret_key;  ///< Z85 of its secret key; never logged
  std::string server_key;  ///< Z85 of the public key the server must prove it holds

  bool enabled() const { return !secret_key.empty(); }
};

/// Makes `socket` a CURVE server (before bind or connect); nothing when `curve` is off. Throws
/// SecurityError for a key that is not Z85 or an empty domain.
void apply(zmq::socket_t& socket, const CurveServer& curve);
/// Makes `socket` a CURVE client (before bind or connect); nothing when `curve` is off. Throws
/// SecurityError for a key that is not Z85.
void apply(zmq::socket_t& socket, const CurveClient& curve);

}  // namespace sectorflow::security
