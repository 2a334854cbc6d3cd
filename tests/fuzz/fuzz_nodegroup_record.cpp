// Fuzz target: NodeGroupRecord::decode (kvstore/schema.hpp), the value of nodegroups/<uid> that
// every producer and aggregator reads from its replica. The input is the value. Properties: decode
// throws nothing but KvstoreError, and a decoded record encodes and decodes back to itself.
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
  std::optional<kv::NodeGroupRecord> record;
  try {
    record = kv::NodeGroupRecord::decode(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const kv::KvstoreError&) {
    return 0;
  }
  require(kv::NodeGroupRecord::decode(record->encode()) == *record, "decode(encode(record)) differs");
  return 0;
}
