// How far msgpack may trust the sizes a message claims. msgpack-c allocates an array or map for
// the element count its header claims before it reads one element, so without limits a 13-byte
// header claiming 4 billion map entries asks for 190 GB (found by tests/fuzz/fuzz_data_header).
// No count or length can exceed the bytes of the message, and no sectorflow message nests
// deeper than 2; with both bounded, what decoding allocates is bounded by a small multiple of the
// message's size. Private to the protocol library.
#pragma once

#include <cstddef>
#include <msgpack.hpp>

namespace sectorflow::protocol::detail {

/// Containers nested deeper are rejected as invalid msgpack. Above the contracts' 2, so that a
/// field of the wrong type is reported as that field's error.
inline constexpr std::size_t kMaxMsgpackDepth = 8;

/// The limits for unpacking a message of `message_bytes` bytes.
inline msgpack::unpack_limit limits_for(std::size_t message_bytes) {
  return msgpack::unpack_limit(message_bytes, message_bytes, message_bytes, message_bytes, message_bytes,
                               kMaxMsgpackDepth);
}

}  // namespace sectorflow::protocol::detail
