// The data message (SPEC.md, "Data message"): one ZeroMQ multipart message of two frames.
//
//   frame 1, header: msgpack array of kDataHeaderFields unsigned integers, in this order:
//     [0] version (kDataHeaderVersion)   [1] scan_number   [2] frame_number   [3] sector
//     [4] scan_x   [5] scan_y            [6] position_x    [7] position_y     [8] thread_id
//     version 3 only: [9] run (the relay thread's run of the scan, SPEC.md "Runs of a scan")
//   frame 2, payload: the sector's pixels, C order, exactly Geometry::sector_bytes() bytes.
//
// A receiver tells a data message from an info message by its part count (two against one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::protocol {

/// 2: the frame number is the detector's frame counter, no longer the flat position (version 1).
/// What producers send (a header with run 0 encodes as version 2).
inline constexpr std::uint32_t kDataHeaderVersion = 2;
/// 3: version 2 and the run (field 9): what a relay thread sends to the NodeGroups.
inline constexpr std::uint32_t kDataHeaderRunVersion = 3;

/// Positions of the header fields in the msgpack array.
enum DataHeaderField : std::size_t {
  kFieldVersion = 0,
  kFieldScanNumber,
  kFieldFrameNumber,
  kFieldSector,
  kFieldScanX,
  kFieldScanY,
  kFieldPositionX,
  kFieldPositionY,
  kFieldThreadId,
  kDataHeaderFields,
  kFieldRun = kDataHeaderFields,  ///< version 3 only
  kDataHeaderRunFields
};

struct DataHeader {
  std::uint32_t scan_number = 0;
  /// The frame's identity in the scan (the detector's frame counter; any start, any order). Routing
  /// uses frame_number mod n_groups, assembly (scan, frame_number); the position places the frame.
  std::uint32_t frame_number = 0;
  std::uint32_t sector = 0;
  std::uint32_t scan_x = 0;  ///< scan shape, probe positions per row
  std::uint32_t scan_y = 0;  ///< scan shape, rows of probe positions
  std::uint32_t position_x = 0;
  std::uint32_t position_y = 0;
  std::uint32_t thread_id = 0;  ///< producer thread that sent it
  /// The relay thread's run of the scan this message is of (random, never 0); 0: none given (a
  /// version-2 header, as producers send).
  std::uint32_t run = 0;

  /// Flat probe position, scan-major (position_y * scan_x + position_x).
  std::uint64_t position() const { return std::uint64_t{position_y} * scan_x + position_x; }
  /// "scan 3, frame 17, sector 2": the locator every error message carries.
  std::string where() const;
  bool operator==(const DataHeader& other) const;
};

/// Encodes a header; the result is the first frame of a data message: version 2 for run 0, else
/// version 3 with the run.
std::string encode_header(const DataHeader& header);

/// Decodes and validates a header on its own: type, field count, version, integer ranges
/// (Refusal::kHeader), then check_placement. Throws ProtocolError naming the field, what was
/// expected and what came.
DataHeader decode_header(const void* data, std::size_t size);

/// Scan sides 1..kMaxScanSide (kShape) and the position inside the scan (kPosition).
void check_placement(const DataHeader& header);

/// What the aggregator routes by: the routing list is per scan, the NodeGroup per frame.
struct FrameRef {
  std::uint32_t scan_number = 0;
  std::uint32_t frame_number = 0;
};

/// Reads only scan and frame number after checking type, field count and version: the
/// aggregator's hot path, which must not pay for the full decode. Throws ProtocolError like
/// decode_header.
FrameRef peek_frame(const void* data, std::size_t size);

/// Throws ProtocolError unless the payload size equals the geometry's sector size (kPayload) and the
/// sector index exists in the geometry (kSector).
void check_payload(const DataHeader& header, std::size_t payload_bytes, const Geometry& geometry);

/// What the thread that receives receiver r's data accepts: the aggregator's relay thread r and
/// port r of every NodeGroup check a data message alike, so that the aggregator refuses what a
/// NodeGroup would and a bad message never crosses the WAN.
struct DataExpectations {
  Geometry geometry;
  ScanLimits limits;
  std::uint32_t sector = 0;  ///< the one sector this port carries (receiver r sends sector r)
};

/// Decodes a data message's header and checks it with its payload size against `expect`:
/// decode_header, the scan within the limits (kShape), the sector (kSector), the payload size
/// (kPayload). Throws ProtocolError with the refusal kind.
DataHeader decode_data(const void* header, std::size_t header_bytes, std::size_t payload_bytes,
                       const DataExpectations& expect);

/// The checks of decode_data after the header decoded: the scan within the limits (kShape), the
/// sector (kSector), the payload size (kPayload). Throws ProtocolError with the refusal kind.
void check_sector(const DataHeader& header, std::size_t payload_bytes, const DataExpectations& expect);

}  // namespace sectorflow::protocol
