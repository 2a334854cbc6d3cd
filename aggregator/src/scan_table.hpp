// The scans one relay thread holds open (SPEC.md step 4), bounded. Scans are announced by peers,
// so their number is capped; making room closes the scan opened first, by arrival and not by
// number (a replayed old scan is as new as any), and never the scan being opened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "scan_state.hpp"

namespace sectorflow::aggregator::detail {

class ScanTable {
 public:
  /// Holds at most `capacity` scans (at least 1).
  explicit ScanTable(std::size_t capacity);

  /// The open scan of that number, or null.
  ScanState* find(std::uint32_t scan);
  /// Opens `state`, whose scan must not be open. If the table was full, the scan opened first
  /// leaves it and is returned, for the caller to report as closed unfinished.
  std::optional<ScanState> open(ScanState state);
  /// Takes an open scan out of the table.
  ScanState close(std::uint32_t scan);

  std::size_t size() const { return scans_.size(); }
  bool empty() const { return scans_.empty(); }
  /// Calls `visit(ScanState&)` for every open scan.
  template <typename Visit>
  void for_each(Visit&& visit) {
    for (auto& [number, entry] : scans_) visit(entry.second);
  }

 private:
  std::size_t capacity_;
  std::uint64_t opened_ = 0;  ///< arrival order: the sequence number of the last scan opened
  std::map<std::uint32_t, std::pair<std::uint64_t, ScanState>> scans_;  ///< number -> (arrival, state)
};

}  // namespace sectorflow::aggregator::detail
