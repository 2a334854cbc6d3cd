// Fuzz target: ServiceStatus::decode (protocol/records.hpp), the values of status/... that
// `sectorflow status` and the services read. The input is the value. Properties: decode throws
// nothing but ProtocolError, and a decoded status encodes and decodes back to the same bytes.
// Bytes, not operator==: a float field may be NaN, which equals nothing. A status whose
// updated_s is 0 is left out of the round trip: encode() stamps the current time then.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "property.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/records.hpp"

namespace sp = sectorflow::protocol;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<sp::ServiceStatus> status;
  try {
    status = sp::ServiceStatus::decode(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const sp::ProtocolError&) {
    return 0;
  }
  if (status->updated_s == 0.0) return 0;
  const std::string encoded = status->encode();
  require(sp::ServiceStatus::decode(encoded).encode() == encoded, "encode(decode(encode(status))) differs");
  return 0;
}
