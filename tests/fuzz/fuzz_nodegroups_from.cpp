// Fuzz target: nodegroups_from (kvstore/schema.hpp), the routing list a producer builds from the
// nodegroups/ subtree of its replica. The input is split into frames by the scheme of frames.hpp;
// frames 0, 2, 4, ... are keys and the frame after each its value (a key without one gets an empty
// value). Properties: nodegroups_from throws nothing but KvstoreError, and what it returns is one
// record per entry, sorted by uid without duplicates, each under its own nodegroups/<uid> key.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frames.hpp"
#include "property.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/schema.hpp"

namespace kv = sectorflow::kvstore;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string_view> frames = sectorflow::fuzz::split_frames(data, size);
  std::map<std::string, std::string> entries;
  for (std::size_t i = 0; i < frames.size(); i += 2) {
    entries[std::string(frames[i])] = i + 1 < frames.size() ? std::string(frames[i + 1]) : std::string();
  }
  std::optional<std::vector<kv::NodeGroupRecord>> records;
  try {
    records = kv::nodegroups_from(entries);
  } catch (const kv::KvstoreError&) {
    return 0;
  }
  require(records->size() == entries.size(), "not one record per entry");
  for (std::size_t i = 0; i < records->size(); ++i) {
    const kv::NodeGroupRecord& record = (*records)[i];
    require(entries.count(kv::nodegroup_key(record.uid)) == 1, "a record under another uid's key");
    require(i == 0 || (*records)[i - 1].uid < record.uid, "records not sorted by uid without duplicates");
  }
  return 0;
}
