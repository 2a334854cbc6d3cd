// Fuzz target: NodeGroupRecord::decode (protocol/records.hpp), the value of nodegroups/<uid> that
// every producer and aggregator reads from its replica. The input is the value. Properties: decode
// throws nothing but ProtocolError, and a decoded record encodes and decodes back to itself.
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
  std::optional<sp::NodeGroupRecord> record;
  try {
    record = sp::NodeGroupRecord::decode(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const sp::ProtocolError&) {
    return 0;
  }
  require(sp::NodeGroupRecord::decode(record->encode()) == *record, "decode(encode(record)) differs");
  return 0;
}
