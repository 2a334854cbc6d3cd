// Fuzz target: nodegroups_from (protocol/records.hpp), the routing list a producer builds from the
// nodegroups/ subtree of its replica. The input is split into frames by the scheme of frames.hpp;
// frames 0, 2, 4, ... are keys and the frame after each its value (a key without one gets an empty
// value). Properties: nodegroups_from throws nothing (a bad entry is skipped and listed, never
// fatal), every entry is either a record or rejected, and the records are sorted by uid without
// duplicates, each under its own nodegroups/<uid> key.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "frames.hpp"
#include "property.hpp"
#include "sectorflow/protocol/records.hpp"

namespace sp = sectorflow::protocol;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string_view> frames = sectorflow::fuzz::split_frames(data, size);
  std::map<std::string, std::string> entries;
  for (std::size_t i = 0; i < frames.size(); i += 2) {
    entries[std::string(frames[i])] = i + 1 < frames.size() ? std::string(frames[i + 1]) : std::string();
  }
  const sp::NodeGroupList list = sp::nodegroups_from(entries);
  require(list.records.size() + list.rejected.size() == entries.size(), "an entry neither a record nor rejected");
  for (std::size_t i = 0; i < list.records.size(); ++i) {
    const sp::NodeGroupRecord& record = list.records[i];
    require(entries.count(sp::nodegroup_key(record.uid)) == 1, "a record under another uid's key");
    require(list.rejected.count(sp::nodegroup_key(record.uid)) == 0, "a key both a record and rejected");
    require(i == 0 || list.records[i - 1].uid < record.uid, "records not sorted by uid without duplicates");
  }
  return 0;
}
