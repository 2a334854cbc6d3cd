// Unpacking a peer's msgpack bytes within bounds. msgpack-c allocates an array or map for the
// element count its header claims before it reads one element, so without limits a few bytes
// claiming 2^32 elements ask for up to 190 GB (found by every fuzz target in tests/fuzz). No count
// or length can exceed the bytes of the message, nesting is bounded, and each message type adds
// the ceilings of its own contract; what decoding allocates is then a small multiple of the
// message's size. Private to the protocol library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <msgpack.hpp>
#include <string>

#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::protocol::detail {

/// Containers nested deeper are rejected as invalid msgpack. Above the contracts' 2, so that a
/// field of the wrong type is reported as that field's error.
inline constexpr std::size_t kMaxMsgpackDepth = 8;

/// The limits for unpacking a message of `message_bytes` bytes: no count or length beyond it.
inline msgpack::unpack_limit limits_for(std::size_t message_bytes) {
  return msgpack::unpack_limit(message_bytes, message_bytes, message_bytes, message_bytes, message_bytes,
                               kMaxMsgpackDepth);
}

/// Exactly one msgpack object filling `size` bytes, within limits_for(size) and `caps` (the
/// contract's own ceilings). Throws ProtocolError of `kind` starting with `what` ("data header").
inline msgpack::object_handle unpack_bounded(const void* data, std::size_t size, const msgpack::unpack_limit& caps,
                                             const std::string& what, Refusal kind) {
  const msgpack::unpack_limit own = limits_for(size);
  const msgpack::unpack_limit limit(std::min(own.array(), caps.array()), std::min(own.map(), caps.map()),
                                    std::min(own.str(), caps.str()), std::min(own.bin(), caps.bin()),
                                    std::min(own.ext(), caps.ext()), std::min(own.depth(), caps.depth()));
  std::size_t offset = 0;
  msgpack::object_handle handle;
  try {
    handle = msgpack::unpack(static_cast<const char*>(data), size, offset, nullptr, nullptr, limit);
  } catch (const std::exception& error) {
    throw ProtocolError(what + ": not valid msgpack within its bounds (" + error.what() + ")", kind);
  }
  if (offset != size) {
    throw ProtocolError(what + ": " + std::to_string(size - offset) + " bytes after the msgpack object", kind);
  }
  return handle;
}

}  // namespace sectorflow::protocol::detail
