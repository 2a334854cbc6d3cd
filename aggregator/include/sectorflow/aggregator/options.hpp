// What an aggregator needs to know: where its threads listen, how many producer threads feed
// each of them, and how to reach the kvstore that says where the NodeGroups are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/protocol/geometry.hpp"

namespace sectorflow::aggregator {

struct AggregatorOptions {
  std::string bind_host;                       ///< interface the PULL sockets bind
  std::uint16_t base_port = 0;                 ///< thread r binds base_port + r
  std::vector<std::uint32_t> producer_threads; ///< T_r for each receiver r: one relay thread each
  int hwm = 1000;                              ///< high-water mark of every socket (messages)
  /// How long a NodeGroup of a routing list may be missing from the kvstore, or a new
  /// downstream connection may take to come up, before its messages count as lost.
  std::uint32_t discovery_wait_ms = 3000;
  /// Scans of one thread kept open at once; beyond it the oldest unfinished one is closed.
  std::uint32_t max_open_scans = 16;
  kvstore::ClientOptions kvstore;              ///< the replica of nodegroups/ (subtree is forced)
  protocol::Geometry geometry;                 ///< what a data message must fit; one sector per receiver
  /// Probe positions of the largest scan accepted ([limits] max_scan_positions); must be set.
  std::uint64_t max_scan_positions = 0;
};

}  // namespace sectorflow::aggregator
