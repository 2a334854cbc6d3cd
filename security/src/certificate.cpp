#include "sectorflow/security/certificate.hpp"

#include <zmq.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <string_view>

#include "sectorflow/security/errors.hpp"

namespace sectorflow::security {
namespace {

constexpr std::size_t kZ85KeyChars = 40;

// The quoted value of a `name = "value"` line, or "" if the line is not that key.
std::string value_of(std::string_view line, std::string_view name) {
  const std::size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos || line.compare(start, name.size(), name) != 0) return {};
  std::string_view rest = line.substr(start + name.size());
  const std::size_t equals = rest.find_first_not_of(" \t");
  if (equals == std::string_view::npos || rest[equals] != '=') return {};
  rest = rest.substr(equals + 1);
  const std::size_t open = rest.find('"');
  const std::size_t close = open == std::string_view::npos ? open : rest.find('"', open + 1);
  if (close == std::string_view::npos) return {};
  return std::string(rest.substr(open + 1, close - open - 1));
}

}  // namespace

bool is_z85_key(const std::string& key) {
  std::array<std::uint8_t, 32> bytes{};
  return key.size() == kZ85KeyChars && zmq_z85_decode(bytes.data(), key.c_str()) != nullptr;
}

Certificate read_certificate(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw SecurityError(path + ": cannot read the certificate (does it exist, and may this user read it?)");
  Certificate certificate;
  std::string line;
  while (std::getline(in, line)) {
    if (std::string value = value_of(line, "public-key"); !value.empty()) certificate.public_key = std::move(value);
    if (std::string value = value_of(line, "secret-key"); !value.empty()) certificate.secret_key = std::move(value);
  }
  if (certificate.public_key.empty()) {
    throw SecurityError(path + ": not a ZeroMQ certificate (no public-key line in its curve section)");
  }
  if (!is_z85_key(certificate.public_key)) {
    throw SecurityError(path + ": public-key is not a Z85 CurveZMQ key (40 characters)");
  }
  if (!certificate.secret_key.empty() && !is_z85_key(certificate.secret_key)) {
    throw SecurityError(path + ": secret-key is not a Z85 CurveZMQ key (40 characters)");
  }
  return certificate;
}

Certificate generate_keypair() {
  std::array<char, kZ85KeyChars + 1> public_key{};
  std::array<char, kZ85KeyChars + 1> secret_key{};
  if (zmq_curve_keypair(public_key.data(), secret_key.data()) != 0) {
    throw SecurityError(std::string("cannot make a CURVE key pair: ") + zmq_strerror(zmq_errno()) +
                        " (is libzmq built with CURVE?)");
  }
  return Certificate{public_key.data(), secret_key.data()};
}

}  // namespace sectorflow::security
