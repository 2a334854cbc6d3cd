#include "scan_table.hpp"

#include <algorithm>

namespace sectorflow::aggregator::detail {

ScanTable::ScanTable(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

ScanState* ScanTable::find(std::uint32_t scan) {
  const auto it = scans_.find(scan);
  return it == scans_.end() ? nullptr : &it->second.second;
}

std::optional<ScanState> ScanTable::open(ScanState state) {
  std::optional<ScanState> evicted;
  if (scans_.size() >= capacity_) {
    const auto first = std::min_element(scans_.begin(), scans_.end(), [](const auto& a, const auto& b) {
      return a.second.first < b.second.first;
    });
    evicted.emplace(std::move(first->second.second));
    scans_.erase(first);
  }
  const std::uint32_t number = state.scan_number();
  scans_.emplace(number, std::make_pair(++opened_, std::move(state)));
  return evicted;
}

ScanState ScanTable::close(std::uint32_t scan) {
  const auto it = scans_.find(scan);
  ScanState state = std::move(it->second.second);
  scans_.erase(it);
  return state;
}

}  // namespace sectorflow::aggregator::detail
