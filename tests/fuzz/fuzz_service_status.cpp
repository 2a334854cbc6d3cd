// Fuzz target: ServiceStatus::decode (kvstore/schema.hpp), the values of status/... that
// `sectorflow status` and the services read. The input is the value. Properties: decode throws
// nothing but KvstoreError, and a decoded status encodes and decodes back to the same bytes.
// Bytes, not operator==: a float field may be NaN, which equals nothing. A status whose
// updated_s is 0 is left out of the round trip: encode() stamps the current time then.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "property.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/schema.hpp"

namespace kv = sectorflow::kvstore;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<kv::ServiceStatus> status;
  try {
    status = kv::ServiceStatus::decode(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const kv::KvstoreError&) {
    return 0;
  }
  if (status->updated_s == 0.0) return 0;
  const std::string encoded = status->encode();
  require(kv::ServiceStatus::decode(encoded).encode() == encoded, "encode(decode(encode(status))) differs");
  return 0;
}
