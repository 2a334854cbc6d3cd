#include "sectorflow/producer/routing.hpp"

#include "sectorflow/protocol/bad_entries.hpp"
#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/producer/errors.hpp"

namespace sectorflow::producer {

std::vector<std::string> routing_from_replica(const kvstore::Client& client, protocol::BadEntries& bad) {
  const protocol::NodeGroupList list =
      protocol::nodegroups_from(client.subtree(std::string(protocol::kNodegroupsPrefix)));
  for (const auto& [key, why] : bad.note(protocol::kNodegroupsPrefix, list.rejected)) {
    if (client.options().log) client.options().log("skipped the registration " + key + ": " + why);
  }
  std::vector<std::string> uids;
  for (const protocol::NodeGroupRecord& record : list.records) uids.push_back(record.uid);
  return uids;  // nodegroups_from sorts by uid
}

void check_routing(const std::vector<std::string>& routing, std::uint32_t scan_number) {
  for (std::size_t i = 0; i < routing.size(); ++i) {
    if (routing[i].empty()) {
      throw ProducerError("scan " + std::to_string(scan_number) + ": routing entry " + std::to_string(i) +
                          " is an empty uid");
    }
    if (i > 0 && !(routing[i - 1] < routing[i])) {
      throw ProducerError("scan " + std::to_string(scan_number) + ": routing list not sorted without duplicates ('" +
                          routing[i - 1] + "' before '" + routing[i] + "'); sort the NodeGroup UIDs");
    }
  }
}

std::map<std::string, std::uint64_t> count_routes(const std::vector<std::string>& routing,
                                                  const std::vector<std::uint32_t>& positions,
                                                  std::uint32_t first_frame) {
  std::map<std::string, std::uint64_t> counts;
  if (routing.empty()) return counts;
  std::vector<std::uint64_t> per_index(routing.size(), 0);
  for (const std::uint32_t position : positions) {
    ++per_index[(std::uint64_t{first_frame} + position) % routing.size()];
  }
  for (std::size_t i = 0; i < routing.size(); ++i) counts[routing[i]] = per_index[i];
  return counts;
}

std::vector<std::uint64_t> count_tier_routes(const std::vector<std::string>& routing, std::uint32_t members,
                                             const std::vector<std::uint32_t>& tier,
                                             const std::vector<std::uint32_t>& positions,
                                             std::uint32_t first_frame) {
  std::vector<std::uint64_t> counts(std::size_t{members} * routing.size(), 0);
  if (routing.empty() || tier.empty()) return counts;
  for (const std::uint32_t position : positions) {
    const std::uint64_t frame = std::uint64_t{first_frame} + position;
    ++counts[std::size_t{tier[frame % tier.size()]} * routing.size() + frame % routing.size()];
  }
  return counts;
}

}  // namespace sectorflow::producer
