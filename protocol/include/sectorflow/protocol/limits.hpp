// The bounds every receiving component puts on what a peer may announce (SPEC.md, "Bounds"). A
// peer's message decides how much state a service creates (a scan table entry, a bit per probe
// position, a routing list), so each such quantity has a ceiling here or in the configuration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sectorflow/protocol/geometry.hpp"

namespace sectorflow::protocol {

/// Largest scan side: the raw fallback format stores sides and positions as uint16 (and frame
/// numbers stay within uint32).
inline constexpr std::uint32_t kMaxScanSide = 65535;
/// Longest routing list of an info message: NodeGroups one scan may be spread over.
inline constexpr std::size_t kMaxRoutingLength = 4096;
/// Aggregators in one tier (protocol/SPEC.md, "The aggregation tier"): the 4D Camera needs five.
inline constexpr std::uint32_t kMaxTier = 16;
/// Longest kvstore key (CHP's key frame, kvstore/SPEC.md): every record's key must fit it.
inline constexpr std::size_t kMaxKeyBytes = 255;
/// Longest NodeGroup uid: "nodegroups/<uid>" must fit a kvstore key.
inline constexpr std::size_t kMaxUidBytes = 244;
/// Runs of one scan a NodeGroup counts apart on one port (SPEC.md "Runs of a scan"): the real run,
/// a stray's and a restarted relay's, with room; a further run's messages are refused.
inline constexpr std::size_t kMaxRunsPerPort = 4;
/// Largest info message: a routing list and a count per uid at their longest fit with room.
inline constexpr std::size_t kMaxInfoBytes = 4 << 20;

/// What the configuration allows beyond the wire's own bounds ([limits] table).
struct ScanLimits {
  /// Probe positions of the largest scan accepted (scan_x * scan_y).
  std::uint64_t max_positions = 0;
};

/// Whether both sides are 1..kMaxScanSide and the scan has at most limits.max_positions positions:
/// the check of every data message, which builds no error text.
bool scan_shape_fits(std::uint32_t scan_x, std::uint32_t scan_y, const ScanLimits& limits);

/// Throws ProtocolError (Refusal::kShape) unless the scan shape fits (scan_shape_fits). `where`
/// starts the message ("scan 3").
void check_scan_shape(std::uint32_t scan_x, std::uint32_t scan_y, const ScanLimits& limits, const std::string& where);

/// The largest single frame a data socket accepts (ZMQ_MAXMSGSIZE): a sector's payload or an info
/// message, whichever is larger. A peer sending more is disconnected by ZeroMQ before we see it.
std::int64_t max_frame_bytes(const Geometry& geometry);

}  // namespace sectorflow::protocol
