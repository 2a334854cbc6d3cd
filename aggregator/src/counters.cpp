#include "sectorflow/aggregator/counters.hpp"

namespace sectorflow::aggregator {

const char* to_string(MalformedKind kind) {
  switch (kind) {
    case MalformedKind::kHeader: return "header";
    case MalformedKind::kParts: return "parts";
    case MalformedKind::kInfo: return "info";
    case MalformedKind::kNoInfo: return "no_info";
  }
  return "unknown";
}

void RelayCounters::malformed(MalformedKind kind, const std::string& what) {
  const auto index = static_cast<std::size_t>(kind);
  if (malformed_[index].fetch_add(1, std::memory_order_relaxed) == 0) {
    const std::lock_guard<std::mutex> lock(first_mutex_);
    first_[index] = what;
  }
}

RelayStats RelayCounters::snapshot() const {
  RelayStats stats;
  stats.thread = thread_;
  stats.scan = scan_.load(std::memory_order_relaxed);
  stats.messages = messages_.load(std::memory_order_relaxed);
  stats.bytes = bytes_.load(std::memory_order_relaxed);
  stats.infos = infos_.load(std::memory_order_relaxed);
  stats.lost = lost_.load(std::memory_order_relaxed);
  stats.open_scans = open_scans_.load(std::memory_order_relaxed);
  stats.streaming = stats.open_scans > 0;
  for (std::size_t i = 0; i < kMalformedKinds; ++i) stats.malformed[i] = malformed_[i].load(std::memory_order_relaxed);
  const std::lock_guard<std::mutex> lock(first_mutex_);
  stats.first_malformed = first_;
  return stats;
}

}  // namespace sectorflow::aggregator
