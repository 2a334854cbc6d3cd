// CurveZMQ certificates in ZeroMQ's text format, the one pyzmq's zmq.auth and czmq's zcert read and
// write: `<name>.key` holds the public key, `<name>.key_secret` the public and the secret key, each
// as a Z85 string of 40 characters in a `curve` section:
//
//   metadata
//   curve
//       public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
//       secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
//
// Only the curve keys are read; metadata and comments are ignored.
#pragma once

#include <string>

namespace sectorflow::security {

/// A key pair as Z85 text; secret_key is empty for a public certificate. Never log secret_key.
struct Certificate {
  std::string public_key;
  std::string secret_key;
};

/// Reads a certificate file. Throws SecurityError naming the file if it cannot be read, has no
/// public-key, or a key that is not 40 characters of Z85.
Certificate read_certificate(const std::string& path);

/// Whether `key` is a Z85 CurveZMQ key (40 characters that decode to 32 bytes).
bool is_z85_key(const std::string& key);

/// A new key pair (zmq_curve_keypair). Throws SecurityError if libzmq lacks CURVE.
Certificate generate_keypair();

}  // namespace sectorflow::security
