// The key-value message of the Clone pattern: the Clustered Hashmap Protocol (CHP) of the ZeroMQ
// Guide, chapter 5 (rfc.zeromq.org/spec:12). Every message on the three kvstore sockets is one
// ZeroMQ multipart message of kKvmsgFrames frames, in this order:
//
//   frame 0, key:        ZeroMQ string, 1..kMaxKeyBytes bytes of UTF-8 ("nodegroups/ng-3"), or a
//                        command word the server sends: "KTHXBAI" (end of snapshot), "HUGZ" (heartbeat)
//   frame 1, sequence:   8 bytes, signed 64-bit integer in network (big-endian) order
//   frame 2, uuid:       kUuidBytes bytes identifying the update, or empty
//   frame 3, properties: zero or more "name=value\n" lines, UTF-8, at most kMaxPropertiesBytes;
//                        "ttl" is the time-to-live in seconds
//   frame 4, body:       the value, one msgpack object; an empty body deletes the key
//
// KVSET (client -> server, port P+2), KVPUB (server -> clients, port P+1), KVSYNC and KTHXBAI
// (snapshot replies on port P, after the client's identity frame) and HUGZ all have this layout.
// The snapshot request is not a kvmsg: two ZeroMQ strings, "ICANHAZ?" and the subtree (a key
// prefix, possibly empty). The sequence of KTHXBAI and HUGZ is the server's current sequence.
//
// Sizes: a value (body) holds at most the configured max_value_bytes ([kvstore] max_value_bytes,
// ServerOptions and ClientOptions). Every kvstore socket sets ZMQ_MAXMSGSIZE to
// max_frame_bytes(max_value_bytes), twice that: a frame a little too large still arrives and is
// refused and counted by the server ("oversized"); a larger one makes ZeroMQ drop the connection
// of its sender without telling anyone (ZeroMQ reports it as an ordinary disconnect).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::kvstore {

inline constexpr std::size_t kKvmsgFrames = 5;

/// Positions of the frames in a kvmsg.
enum KvmsgFrame : std::size_t { kFrameKey = 0, kFrameSequence, kFrameUuid, kFrameProperties, kFrameBody };

inline constexpr std::size_t kSequenceBytes = 8;
inline constexpr std::size_t kUuidBytes = 16;
inline constexpr std::size_t kMaxKeyBytes = protocol::kMaxKeyBytes;
/// Bytes of the properties frame: CHP uses "ttl" only; this leaves room for a few more.
inline constexpr std::size_t kMaxPropertiesBytes = 1024;

/// ZMQ_MAXMSGSIZE of every kvstore socket for values of at most `max_value_bytes` (see above).
inline std::int64_t max_frame_bytes(std::size_t max_value_bytes) {
  return 2 * static_cast<std::int64_t>(max_value_bytes);
}

inline constexpr std::string_view kSnapshotRequest = "ICANHAZ?";
inline constexpr std::string_view kSnapshotEnd = "KTHXBAI";
inline constexpr std::string_view kHeartbeat = "HUGZ";
/// The body of a HUGZ from a server of a pair that does not serve (kvstore/SPEC.md, "The pair"):
/// its clients take it for no sign of a server they can use, so they leave it.
inline constexpr std::string_view kPassiveHeartbeat = "passive";
inline constexpr std::string_view kTtlProperty = "ttl";
/// A KVSET with "create=1" is taken only if its key is absent (one claim wins; kvstore/SPEC.md,
/// "Wire"); the server drops the property before it publishes the update.
inline constexpr std::string_view kCreateProperty = "create";
/// With [security] on, the server stamps every KVPUB of a client's write with "writer=<role>/<name>"
/// (the writer's ZAP User-Id) and drops a "writer" a client sent: a pair's passive mirrors who
/// holds each key, so that the write policy holds it after a failover (kvstore/SPEC.md, "Wire").
inline constexpr std::string_view kWriterProperty = "writer";
/// The longest ttl any configuration may allow (seconds, about 32 years): a deadline this far stays
/// far inside a steady_clock, whose nanoseconds overflow after 292 years.
inline constexpr double kTtlCeilingS = 1e9;

using Properties = std::map<std::string, std::string>;

struct KvMsg {
  std::string key;
  std::int64_t sequence = 0;
  std::string uuid;  ///< kUuidBytes bytes, or empty
  Properties properties;
  std::string body;  ///< msgpack bytes; empty deletes the key

  bool is_delete() const { return body.empty(); }
  /// The "ttl" property in seconds, 0 when absent. Throws KvstoreError unless it is a finite
  /// number >= 0.
  double ttl_s() const;
  /// Sets the "ttl" property (shortest decimal form); 0 removes it.
  void set_ttl_s(double ttl_s);
  bool operator==(const KvMsg& other) const;
  bool operator!=(const KvMsg& other) const { return !(*this == other); }
};

/// True for the words the protocol reserves in the key frame ("KTHXBAI", "HUGZ", "ICANHAZ?").
bool is_command_key(std::string_view key);

/// Throws KvstoreError unless `key` can be set by a client: 1..kMaxKeyBytes bytes of UTF-8, not a
/// command word.
void check_key(std::string_view key);

std::string encode_sequence(std::int64_t sequence);
/// Throws KvstoreError unless the frame has exactly kSequenceBytes bytes.
std::int64_t decode_sequence(std::string_view frame);

/// "name=value\n" per property; throws KvstoreError if a name is empty or holds '=' or '\n', or
/// a value holds '\n'.
std::string encode_properties(const Properties& properties);
/// Splits at the first '=' of each line; empty lines are skipped, a last line may lack its '\n'.
/// Throws KvstoreError for a line without '=' or with an empty name.
Properties decode_properties(std::string_view frame);

/// kUuidBytes random bytes (a version-4 UUID).
std::string new_uuid();

/// Throws KvstoreError unless `body` holds exactly one complete msgpack object.
void check_msgpack(std::string_view body);

/// The kKvmsgFrames frames of a message.
std::vector<std::string> encode_kvmsg(const KvMsg& msg);

/// Decodes and validates the frames of a kvmsg: frame count, key length and UTF-8, sequence size,
/// uuid size, properties size, UTF-8 and syntax. It does not look at the body (see check_msgpack).
/// Throws KvstoreError naming the key and what was expected.
KvMsg decode_kvmsg(const std::vector<std::string_view>& frames);

/// Sends `msg` after `prefix` frames (a ROUTER's identity), by default without blocking. Returns
/// false if the socket would block or its send timeout passed (nothing is sent then); throws
/// zmq::error_t on socket errors.
bool send_kvmsg(zmq::socket_ref socket, const KvMsg& msg, const std::vector<std::string>& prefix = {},
                zmq::send_flags flags = zmq::send_flags::dontwait);

/// Receives one whole message without waiting: keeps its first `keep` frames in `parts` (cleared
/// first) and drops the others, since a peer may send a message of any number of frames. Returns
/// how many frames the message had, 0 if none was waiting; throws zmq::error_t on socket errors.
std::size_t recv_frames(zmq::socket_ref socket, std::vector<zmq::message_t>& parts, std::size_t keep);

/// Views of received frames, for decode_kvmsg; valid while `parts` lives.
std::vector<std::string_view> frame_views(const std::vector<zmq::message_t>& parts);

}  // namespace sectorflow::kvstore
