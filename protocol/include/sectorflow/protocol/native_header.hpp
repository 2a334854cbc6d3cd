// The 4D Camera receivers' own data header (SPEC.md, "Two dialects"): the stream the detector's
// receiver software sends, which a receiver configured with `wire = "native"` speaks.
//
//   frame 1, header: msgpack array of kNativeHeaderFields unsigned integers, in this order:
//     [0] scan_number                  [1] frame_number (the detector's frame counter)
//     [2] num_frames_this_thread       [3] nSTEM_positions_per_row_m1 (scan_x - 1)
//     [4] nSTEM_rows_m1 (scan_y - 1)   [5] STEM_x_position_in_row   [6] STEM_row_in_scan
//     [7] thread_id                    [8] module (the sector)
//   frame 2, payload: the module's pixels, C order, exactly Geometry::sector_bytes() bytes.
//
// There is no info message: each header says how many data messages its thread sends for the scan.
// The frame counter need not start at 0 nor equal the flat position; the position is fields 5, 6.
// Only the aggregator's relay thread of a native receiver reads this header: it forwards the
// sector under SFSP's own header (data_message.hpp), so NodeGroups speak one dialect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sectorflow/protocol/data_message.hpp"

namespace sectorflow::protocol {

/// Positions of the native header's fields in its msgpack array.
enum NativeHeaderField : std::size_t {
  kNativeScanNumber = 0,
  kNativeFrameNumber,
  kNativeFramesThisThread,
  kNativePositionsPerRowM1,
  kNativeRowsM1,
  kNativePositionX,
  kNativePositionY,
  kNativeThreadId,
  kNativeModule,
  kNativeHeaderFields
};

struct NativeHeader {
  std::uint32_t scan_number = 0;
  std::uint32_t frame_number = 0;
  std::uint32_t frames_this_thread = 0;  ///< num_frames_this_thread: data messages the thread sends for the scan
  std::uint32_t positions_per_row_m1 = 0;
  std::uint32_t rows_m1 = 0;
  std::uint32_t position_x = 0;
  std::uint32_t position_y = 0;
  std::uint32_t thread_id = 0;
  std::uint32_t module = 0;

  bool operator==(const NativeHeader& other) const;
};

/// Encodes a native header (each field the smallest msgpack unsigned integer that holds it, as the
/// detector's software packs them); the result is the first frame of a native data message.
std::string encode_native_header(const NativeHeader& header);

/// The same sector as SFSP's header names it: scan shape from the "_m1" fields, sector = module.
DataHeader to_data_header(const NativeHeader& header);
/// The native header of an SFSP header, with the thread's message count for the scan.
NativeHeader to_native_header(const DataHeader& header, std::uint32_t frames_this_thread);

/// Decodes a native header on its own: one msgpack array of exactly kNativeHeaderFields unsigned
/// integers below 2^32 (Refusal::kHeader), scan sides 1..kMaxScanSide (kShape), position inside
/// the scan (kPosition), num_frames_this_thread at least 1 and at most the scan's positions
/// (kHeader). Throws ProtocolError naming the field, what was expected and what came.
NativeHeader decode_native_header(const void* data, std::size_t size);

/// What a native receiver's relay thread accepts, beyond DataExpectations: thread ids below the
/// receiver's configured thread count.
struct NativeExpectations {
  DataExpectations data;
  std::uint32_t threads = 1;  ///< [[receivers]] threads of this receiver
};

/// Decodes and checks a native data message as decode_data does an SFSP one (scan within the
/// limits, module = the port's sector, payload size), and its thread id (kHeader). Throws
/// ProtocolError with the refusal kind.
NativeHeader decode_native_data(const void* header, std::size_t header_bytes, std::size_t payload_bytes,
                                const NativeExpectations& expect);

}  // namespace sectorflow::protocol
