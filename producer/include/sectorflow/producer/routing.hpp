// The routing list of a scan (protocol/SPEC.md, "A scan, message by message", step 1): fixed once
// at scan start, sorted NodeGroup UIDs without duplicates; frame number f goes to routing[f % n]; an
// empty list means fallback.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sectorflow::kvstore {
class Client;
}
namespace sectorflow::protocol {
class BadEntries;
}

namespace sectorflow::producer {

/// The sorted UIDs of the usable NodeGroups registered in `client`'s replica (nodegroups/*). Reads
/// the local replica only. A registration that does not decode is skipped, never fatal: each is
/// logged once through the client's log function and counted in `bad` (the reader's memory of
/// what it reported; keep one per reader).
std::vector<std::string> routing_from_replica(const kvstore::Client& client, protocol::BadEntries& bad);

/// Throws ProducerError unless `routing` is sorted, without duplicates and without empty UIDs.
void check_routing(const std::vector<std::string>& routing, std::uint32_t scan_number);

/// UID -> number of `positions` routed to it, every UID of `routing` present (zeros included).
/// Position p is frame number first_frame + p, which goes to routing[(first_frame + p) % n]: the
/// aggregator routes by the frame number, so must the counts. `first_frame` + p must fit a uint32
/// (begin_scan checks it).
std::map<std::string, std::uint64_t> count_routes(const std::vector<std::string>& routing,
                                                  const std::vector<std::uint32_t>& positions,
                                                  std::uint32_t first_frame = 0);

/// With a tier of `members` aggregators of which `tier` (ascending) carry the scan, frame f goes to
/// member tier[f % tier.size()]: the counts of `positions` per member m (every member, those not
/// in `tier` zero) and routing index g, at [m * routing.size() + g].
std::vector<std::uint64_t> count_tier_routes(const std::vector<std::string>& routing, std::uint32_t members,
                                             const std::vector<std::uint32_t>& tier,
                                             const std::vector<std::uint32_t>& positions,
                                             std::uint32_t first_frame = 0);

}  // namespace sectorflow::producer
