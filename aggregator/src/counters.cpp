#include "sectorflow/aggregator/counters.hpp"

namespace sectorflow::aggregator {

RelayStats RelayCounters::snapshot() const {
  RelayStats stats;
  stats.thread = thread_;
  stats.scan = scan_.load(std::memory_order_relaxed);
  stats.messages = messages_.load(std::memory_order_relaxed);
  stats.bytes = bytes_.load(std::memory_order_relaxed);
  stats.infos = infos_.load(std::memory_order_relaxed);
  stats.lost = lost_.load(std::memory_order_relaxed);
  stats.dead = dead_.load(std::memory_order_relaxed);
  stats.recovered_scans = recovered_scans_.load(std::memory_order_relaxed);
  stats.native_scans = native_scans_.load(std::memory_order_relaxed);
  stats.open_scans = open_scans_.load(std::memory_order_relaxed);
  stats.evicted_scans = evicted_scans_.load(std::memory_order_relaxed);
  stats.streaming = stats.open_scans > 0;
  stats.malformed = malformed_.snapshot();
  return stats;
}

}  // namespace sectorflow::aggregator
