// Fuzz target: the info message (protocol/info_message.hpp), as the aggregator and the NodeGroups
// get it from any peer. The input is the one frame. Properties: decode_info throws nothing but
// ProtocolError, and a decoded message encodes and decodes back to itself.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "property.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/info_message.hpp"

namespace sp = sectorflow::protocol;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<sp::InfoMessage> info;
  try {
    info = sp::decode_info(data, size);
  } catch (const sp::ProtocolError&) {
    return 0;
  }
  const std::string encoded = sp::encode_info(*info);
  require(sp::decode_info(encoded.data(), encoded.size()) == *info, "decode(encode(info)) differs");
  return 0;
}
