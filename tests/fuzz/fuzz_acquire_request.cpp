// Fuzz target: AcquireRequest::decode (kvstore/schema.hpp), the value of acquire/request that
// every producer daemon acts on. The input is the value. Properties: decode throws nothing but
// KvstoreError, and a decoded request encodes (the encoder validates it again) and decodes back to
// itself.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "property.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/schema.hpp"

namespace kv = sectorflow::kvstore;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<kv::AcquireRequest> request;
  try {
    request = kv::AcquireRequest::decode(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const kv::KvstoreError&) {
    return 0;
  }
  require(kv::AcquireRequest::decode(request->encode()) == *request, "decode(encode(request)) differs");
  return 0;
}
