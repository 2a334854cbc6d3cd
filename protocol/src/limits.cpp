#include "sectorflow/protocol/limits.hpp"

#include <algorithm>

#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::protocol {

bool scan_shape_fits(std::uint32_t scan_x, std::uint32_t scan_y, const ScanLimits& limits) {
  return scan_x != 0 && scan_y != 0 && scan_x <= kMaxScanSide && scan_y <= kMaxScanSide &&
         std::uint64_t{scan_x} * scan_y <= limits.max_positions;
}

void check_scan_shape(std::uint32_t scan_x, std::uint32_t scan_y, const ScanLimits& limits, const std::string& where) {
  if (scan_shape_fits(scan_x, scan_y, limits)) return;
  const std::string shape = std::to_string(scan_x) + " x " + std::to_string(scan_y);
  if (scan_x == 0 || scan_y == 0 || scan_x > kMaxScanSide || scan_y > kMaxScanSide) {
    throw ProtocolError(where + ": scan shape " + shape + " outside 1.." + std::to_string(kMaxScanSide) + " per side",
                        Refusal::kShape);
  }
  if (std::uint64_t{scan_x} * scan_y > limits.max_positions) {
    throw ProtocolError(where + ": scan shape " + shape + " has more than the " +
                            std::to_string(limits.max_positions) + " positions allowed ([limits] max_scan_positions)",
                        Refusal::kShape);
  }
}

std::int64_t max_frame_bytes(const Geometry& geometry) {
  return static_cast<std::int64_t>(std::max(geometry.sector_bytes(), kMaxInfoBytes));
}

}  // namespace sectorflow::protocol
