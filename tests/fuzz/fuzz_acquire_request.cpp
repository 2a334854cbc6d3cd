// Fuzz target: AcquireRequest::decode (protocol/records.hpp), the value of acquire/request that
// every producer daemon acts on. The input is the value. Properties: decode throws nothing but
// ProtocolError, and a decoded request encodes (the encoder validates it again) and decodes back to
// itself.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "property.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/records.hpp"

namespace sp = sectorflow::protocol;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<sp::AcquireRequest> request;
  try {
    request = sp::AcquireRequest::decode(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const sp::ProtocolError&) {
    return 0;
  }
  require(sp::AcquireRequest::decode(request->encode()) == *request, "decode(encode(request)) differs");
  return 0;
}
