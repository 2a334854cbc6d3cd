#include "sectorflow/kvstore/kvmsg.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <msgpack.hpp>
#include <random>
#include <zmq_addon.hpp>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/protocol/text.hpp"

namespace sectorflow::kvstore {
namespace {

using protocol::shown;

std::string about(std::string_view key) { return "kvmsg " + shown(key); }

std::string sequence_size_error(std::size_t size) {
  return "sequence frame of " + std::to_string(size) + " bytes, expected " + std::to_string(kSequenceBytes) +
         " (big-endian int64)";
}

// `what` starts the error message ("kvmsg" or "kvmsg 'key'").
Properties parse_properties(std::string_view frame, const std::string& what) {
  Properties properties;
  while (!frame.empty()) {
    const std::size_t end = frame.find('\n');
    const std::string_view line = frame.substr(0, end);
    frame = end == std::string_view::npos ? std::string_view() : frame.substr(end + 1);
    if (line.empty()) continue;
    const std::size_t equals = line.find('=');
    if (equals == std::string_view::npos || equals == 0) {
      throw KvstoreError(what + ": property line " + shown(line) + " is not name=value");
    }
    properties[std::string(line.substr(0, equals))] = std::string(line.substr(equals + 1));
  }
  return properties;
}

// Validates msgpack without building objects; remembers why it failed, in msgpack-c's words.
struct BodyCheck : msgpack::null_visitor {
  const char* error = nullptr;
  void parse_error(std::size_t /*parsed*/, std::size_t /*at*/) { error = "parse error"; }
  void insufficient_bytes(std::size_t /*parsed*/, std::size_t /*at*/) { error = "insufficient bytes"; }
};

}  // namespace

double KvMsg::ttl_s() const {
  const auto found = properties.find(std::string(kTtlProperty));
  if (found == properties.end()) return 0.0;
  const std::string& text = found->second;
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < 0.0) {
    throw KvstoreError(about(key) + ": property ttl=" + shown(text) + " is not a number of seconds >= 0");
  }
  return value;
}

void KvMsg::set_ttl_s(double ttl_s) {
  if (!std::isfinite(ttl_s) || ttl_s < 0.0) {
    throw KvstoreError(about(key) + ": ttl " + std::to_string(ttl_s) + " s: expected a finite number >= 0");
  }
  if (ttl_s == 0.0) {
    properties.erase(std::string(kTtlProperty));
    return;
  }
  std::array<char, 32> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), ttl_s);
  properties[std::string(kTtlProperty)] = std::string(buffer.data(), result.ptr);
}

bool KvMsg::operator==(const KvMsg& o) const {
  return key == o.key && sequence == o.sequence && uuid == o.uuid && properties == o.properties && body == o.body;
}

bool is_command_key(std::string_view key) {
  return key == kSnapshotEnd || key == kHeartbeat || key == kSnapshotRequest;
}

void check_key(std::string_view key) {
  if (key.empty()) throw KvstoreError("kvmsg: empty key; a key names the value, e.g. 'status/producer/r0t0'");
  if (key.size() > kMaxKeyBytes) {
    throw KvstoreError(about(key) + ": key of " + std::to_string(key.size()) + " bytes, at most " +
                       std::to_string(kMaxKeyBytes) + " allowed");
  }
  if (is_command_key(key)) throw KvstoreError(about(key) + ": this key is a protocol command word, not a key");
  if (!protocol::valid_utf8(key)) throw KvstoreError(about(key) + ": key is not valid UTF-8; keys are text");
}

std::string encode_sequence(std::int64_t sequence) {
  std::string frame(kSequenceBytes, '\0');
  const auto value = static_cast<std::uint64_t>(sequence);
  for (std::size_t i = 0; i < kSequenceBytes; ++i) {
    frame[i] = static_cast<char>((value >> (8 * (kSequenceBytes - 1 - i))) & 0xffU);
  }
  return frame;
}

std::int64_t decode_sequence(std::string_view frame) {
  if (frame.size() != kSequenceBytes) throw KvstoreError("kvmsg: " + sequence_size_error(frame.size()));
  std::uint64_t value = 0;
  for (const char byte : frame) value = (value << 8) | static_cast<unsigned char>(byte);
  return static_cast<std::int64_t>(value);
}

std::string encode_properties(const Properties& properties) {
  std::string frame;
  for (const auto& [name, value] : properties) {
    if (name.empty() || name.find_first_of("=\n") != std::string::npos) {
      throw KvstoreError("kvmsg: property name " + shown(name) + " must be non-empty without '=' or newline");
    }
    if (value.find('\n') != std::string::npos) {
      throw KvstoreError("kvmsg: property " + name + " holds a newline");
    }
    frame += name;
    frame += '=';
    frame += value;
    frame += '\n';
  }
  return frame;
}

Properties decode_properties(std::string_view frame) { return parse_properties(frame, "kvmsg"); }

std::string new_uuid() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  std::string uuid(kUuidBytes, '\0');
  for (std::size_t i = 0; i < kUuidBytes; i += 8) {
    const std::uint64_t bits = generator();
    for (std::size_t j = 0; j < 8; ++j) uuid[i + j] = static_cast<char>((bits >> (8 * j)) & 0xffU);
  }
  uuid[6] = static_cast<char>((static_cast<unsigned char>(uuid[6]) & 0x0fU) | 0x40U);  // version 4
  uuid[8] = static_cast<char>((static_cast<unsigned char>(uuid[8]) & 0x3fU) | 0x80U);  // RFC 4122 variant
  return uuid;
}

void check_msgpack(std::string_view body) {
  // Parsed without building objects: msgpack::unpack would allocate every array and map for the
  // count its header claims before reading one element (5 bytes claiming 2^32 elements ask for
  // 100 GB; found by tests/fuzz/fuzz_kvmsg). The server checks every value it is sent, and keeps
  // none of the parse.
  BodyCheck check;
  std::size_t offset = 0;
  if (!msgpack::parse(body.data(), body.size(), offset, check)) {
    throw KvstoreError("body of " + std::to_string(body.size()) + " bytes is not valid msgpack (" +
                       (check.error != nullptr ? check.error : "parse error") + ")");
  }
  if (offset != body.size()) {
    throw KvstoreError("body is not one msgpack object: " + std::to_string(body.size() - offset) +
                       " bytes follow the first object");
  }
}

std::vector<std::string> encode_kvmsg(const KvMsg& msg) {
  if (!msg.uuid.empty() && msg.uuid.size() != kUuidBytes) {
    throw KvstoreError(about(msg.key) + ": uuid of " + std::to_string(msg.uuid.size()) + " bytes, expected " +
                       std::to_string(kUuidBytes) + " or none");
  }
  return {msg.key, encode_sequence(msg.sequence), msg.uuid, encode_properties(msg.properties), msg.body};
}

KvMsg decode_kvmsg(const std::vector<std::string_view>& frames) {
  if (frames.size() != kKvmsgFrames) {
    throw KvstoreError("kvmsg: " + std::to_string(frames.size()) + " frames, expected " +
                       std::to_string(kKvmsgFrames) + " (key, sequence, uuid, properties, body)");
  }
  KvMsg msg;
  msg.key = std::string(frames[kFrameKey]);
  if (msg.key.empty()) throw KvstoreError("kvmsg: empty key frame");
  if (msg.key.size() > kMaxKeyBytes) {
    throw KvstoreError(about(msg.key) + ": key of " + std::to_string(msg.key.size()) + " bytes, at most " +
                       std::to_string(kMaxKeyBytes) + " allowed");
  }
  if (frames[kFrameSequence].size() != kSequenceBytes) {
    throw KvstoreError(about(msg.key) + ": " + sequence_size_error(frames[kFrameSequence].size()));
  }
  if (!protocol::valid_utf8(msg.key)) throw KvstoreError(about(msg.key) + ": key is not valid UTF-8; keys are text");
  msg.sequence = decode_sequence(frames[kFrameSequence]);
  const std::string_view properties = frames[kFrameProperties];
  if (properties.size() > kMaxPropertiesBytes) {
    throw KvstoreError(about(msg.key) + ": properties frame of " + std::to_string(properties.size()) +
                       " bytes, at most " + std::to_string(kMaxPropertiesBytes) + " allowed");
  }
  if (!protocol::valid_utf8(properties)) throw KvstoreError(about(msg.key) + ": properties are not valid UTF-8");
  msg.properties = parse_properties(properties, about(msg.key));
  const std::string_view uuid = frames[kFrameUuid];
  if (!uuid.empty() && uuid.size() != kUuidBytes) {
    throw KvstoreError(about(msg.key) + ": uuid frame of " + std::to_string(uuid.size()) + " bytes, expected " +
                       std::to_string(kUuidBytes) + " or none");
  }
  msg.uuid = std::string(uuid);
  msg.body = std::string(frames[kFrameBody]);
  return msg;
}

bool send_kvmsg(zmq::socket_ref socket, const KvMsg& msg, const std::vector<std::string>& prefix,
                zmq::send_flags flags) {
  std::vector<zmq::const_buffer> parts;
  parts.reserve(prefix.size() + kKvmsgFrames);
  for (const std::string& frame : prefix) parts.emplace_back(frame.data(), frame.size());
  const std::vector<std::string> frames = encode_kvmsg(msg);
  for (const std::string& frame : frames) parts.emplace_back(frame.data(), frame.size());
  return zmq::send_multipart(socket, parts, flags).has_value();
}

std::size_t recv_frames(zmq::socket_ref socket, std::vector<zmq::message_t>& parts, std::size_t keep) {
  parts.clear();
  std::size_t frames = 0;
  while (true) {
    zmq::message_t frame;
    // The frames of a message arrive together: only the first may be missing.
    if (!socket.recv(frame, frames == 0 ? zmq::recv_flags::dontwait : zmq::recv_flags::none)) return 0;
    ++frames;
    const bool more = frame.more();
    if (parts.size() < keep) parts.push_back(std::move(frame));
    if (!more) return frames;
  }
}

std::vector<std::string_view> frame_views(const std::vector<zmq::message_t>& parts) {
  std::vector<std::string_view> views;
  views.reserve(parts.size());
  for (const zmq::message_t& part : parts) views.emplace_back(part.data<char>(), part.size());
  return views;
}

}  // namespace sectorflow::kvstore
