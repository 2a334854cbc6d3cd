#include "sectorflow/protocol/refusal.hpp"

namespace sectorflow::protocol {

const char* to_string(Refusal kind) {
  switch (kind) {
    case Refusal::kParts: return "parts";
    case Refusal::kHeader: return "header";
    case Refusal::kShape: return "shape";
    case Refusal::kPosition: return "position";
    case Refusal::kSector: return "sector";
    case Refusal::kPayload: return "payload";
    case Refusal::kInfo: return "info";
    case Refusal::kNoInfo: return "no_info";
    case Refusal::kScan: return "scan";
    case Refusal::kOpenScans: return "open_scans";
    case Refusal::kError: return "error";
  }
  return "unknown";
}

std::uint64_t RefusalStats::total() const {
  std::uint64_t sum = 0;
  for (const std::uint64_t n : counts) sum += n;
  return sum;
}

void RefusalCounters::count(Refusal kind, const std::string& what) {
  const auto index = static_cast<std::size_t>(kind);
  if (counts_[index].fetch_add(1, std::memory_order_relaxed) == 0) {
    const std::lock_guard<std::mutex> lock(first_mutex_);
    first_[index] = what;
  }
}

RefusalStats RefusalCounters::snapshot() const {
  RefusalStats stats;
  const std::lock_guard<std::mutex> lock(first_mutex_);
  for (std::size_t i = 0; i < kRefusalKinds; ++i) stats.counts[i] = counts_[i].load(std::memory_order_relaxed);
  stats.first = first_;
  return stats;
}

}  // namespace sectorflow::protocol
