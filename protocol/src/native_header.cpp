#include "sectorflow/protocol/native_header.hpp"

#include <array>
#include <msgpack.hpp>

#include "msgpack_reader.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::protocol {
namespace {

// The detector software's own names, so that an error points at the field a receiver author knows.
constexpr const char* kNativeFieldNames[kNativeHeaderFields] = {
    "scan_number",   "frame_number",           "num_frames_this_thread", "nSTEM_positions_per_row_m1",
    "nSTEM_rows_m1", "STEM_x_position_in_row", "STEM_row_in_scan",       "thread_id",
    "module"};

std::string where(const NativeHeader& h) {
  return "scan " + std::to_string(h.scan_number) + ", frame " + std::to_string(h.frame_number) + ", module " +
         std::to_string(h.module) + ", thread " + std::to_string(h.thread_id);
}

}  // namespace

bool NativeHeader::operator==(const NativeHeader& o) const {
  return scan_number == o.scan_number && frame_number == o.frame_number &&
         frames_this_thread == o.frames_this_thread && positions_per_row_m1 == o.positions_per_row_m1 &&
         rows_m1 == o.rows_m1 && position_x == o.position_x && position_y == o.position_y &&
         thread_id == o.thread_id && module == o.module;
}

std::string encode_native_header(const NativeHeader& h) {
  msgpack::sbuffer buffer(48);
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_array(kNativeHeaderFields);
  for (std::uint32_t value : {h.scan_number, h.frame_number, h.frames_this_thread, h.positions_per_row_m1, h.rows_m1,
                              h.position_x, h.position_y, h.thread_id, h.module}) {
    packer.pack(value);  // the smallest encoding that holds it, as msgpack's own packers write
  }
  return std::string(buffer.data(), buffer.size());
}

DataHeader to_data_header(const NativeHeader& h) {
  DataHeader d;
  d.scan_number = h.scan_number;
  d.frame_number = h.frame_number;
  d.sector = h.module;
  // Sides above kMaxScanSide are refused before anyone reads them; the wrap of 2^32 - 1 + 1 to 0 is
  // refused as a side of 0.
  d.scan_x = h.positions_per_row_m1 + 1;
  d.scan_y = h.rows_m1 + 1;
  d.position_x = h.position_x;
  d.position_y = h.position_y;
  d.thread_id = h.thread_id;
  return d;
}

NativeHeader to_native_header(const DataHeader& d, std::uint32_t frames_this_thread) {
  NativeHeader h;
  h.scan_number = d.scan_number;
  h.frame_number = d.frame_number;
  h.frames_this_thread = frames_this_thread;
  h.positions_per_row_m1 = d.scan_x - 1;
  h.rows_m1 = d.scan_y - 1;
  h.position_x = d.position_x;
  h.position_y = d.position_y;
  h.thread_id = d.thread_id;
  h.module = d.sector;
  return h;
}

NativeHeader decode_native_header(const void* data, std::size_t size) {
  std::array<std::uint32_t, kNativeHeaderFields> f{};
  detail::unpack_u32_array(data, size, kNativeFieldNames, kNativeHeaderFields, f.data(), "native header");
  NativeHeader h;
  h.scan_number = f[kNativeScanNumber];
  h.frame_number = f[kNativeFrameNumber];
  h.frames_this_thread = f[kNativeFramesThisThread];
  h.positions_per_row_m1 = f[kNativePositionsPerRowM1];
  h.rows_m1 = f[kNativeRowsM1];
  h.position_x = f[kNativePositionX];
  h.position_y = f[kNativePositionY];
  h.thread_id = f[kNativeThreadId];
  h.module = f[kNativeModule];
  if (h.positions_per_row_m1 >= kMaxScanSide || h.rows_m1 >= kMaxScanSide) {
    throw ProtocolError(where(h) + ": scan of " + std::to_string(std::uint64_t{h.positions_per_row_m1} + 1) + " x " +
                            std::to_string(std::uint64_t{h.rows_m1} + 1) + " positions (fields 'nSTEM_..._m1' + 1) "
                            "outside 1.." + std::to_string(kMaxScanSide) + " per side",
                        Refusal::kShape);
  }
  check_placement(to_data_header(h));
  const std::uint64_t positions = (std::uint64_t{h.positions_per_row_m1} + 1) * (std::uint64_t{h.rows_m1} + 1);
  if (h.frames_this_thread == 0 || h.frames_this_thread > positions) {
    throw ProtocolError(where(h) + ": field 'num_frames_this_thread' is " + std::to_string(h.frames_this_thread) +
                            "; a thread sends 1 to " + std::to_string(positions) + " frames of this scan",
                        Refusal::kHeader);
  }
  return h;
}

NativeHeader decode_native_data(const void* header, std::size_t header_bytes, std::size_t payload_bytes,
                                const NativeExpectations& expect) {
  const NativeHeader h = decode_native_header(header, header_bytes);
  if (h.thread_id >= expect.threads) {
    throw ProtocolError(where(h) + ": field 'thread_id' must be below " + std::to_string(expect.threads) +
                            " ([[receivers]] threads of this receiver in the configuration)",
                        Refusal::kHeader);
  }
  check_sector(to_data_header(h), payload_bytes, expect.data);
  return h;
}

}  // namespace sectorflow::protocol
