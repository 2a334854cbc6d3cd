#include "sectorflow/security/curve.hpp"

#include "sectorflow/security/certificate.hpp"
#include "sectorflow/security/errors.hpp"

namespace sectorflow::security {
namespace {

void check(const std::string& key, const char* what) {
  if (!is_z85_key(key)) throw SecurityError(std::string("CURVE: the ") + what + " is not a Z85 key of 40 characters");
}

}  // namespace

void apply(zmq::socket_t& socket, const CurveServer& curve) {
  if (!curve.enabled()) return;
  check(curve.secret_key, "secret key");
  if (curve.domain.empty()) throw SecurityError("CURVE: a server socket needs a ZAP domain");
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, curve.secret_key);
  socket.set(zmq::sockopt::zap_domain, curve.domain);
}

void apply(zmq::socket_t& socket, const CurveClient& curve) {
  if (!curve.enabled()) return;
  check(curve.public_key, "public key");
  check(curve.secret_key, "secret key");
  check(curve.server_key, "server's public key");
  socket.set(zmq::sockopt::curve_serverkey, curve.server_key);
  socket.set(zmq::sockopt::curve_publickey, curve.public_key);
  socket.set(zmq::sockopt::curve_secretkey, curve.secret_key);
}

}  // namespace sectorflow::security
