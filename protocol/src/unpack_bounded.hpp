// Unpacking a peer's msgpack bytes with a ceiling on every container and string. msgpack-c
// allocates a container's elements as soon as it reads the declared size, so five bytes claiming
// an array of 2^32 elements would otherwise ask for ~100 GB. Private to the protocol library.
#pragma once

#include <cstddef>
#include <msgpack.hpp>
#include <string>

#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::protocol::detail {

/// Exactly one msgpack object filling `size` bytes, within `limit`. Throws ProtocolError of `kind`
/// starting with `what` ("data header") otherwise.
inline msgpack::object_handle unpack_bounded(const void* data, std::size_t size, const msgpack::unpack_limit& limit,
                                             const std::string& what, Refusal kind) {
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
