#include "sectorflow/protocol/data_message.hpp"

#include <limits>
#include <msgpack.hpp>

#include "msgpack_reader.hpp"
#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::protocol {
namespace {

constexpr const char* kFieldNames[kDataHeaderFields] = {
    "version", "scan_number", "frame_number", "sector",     "scan_x",
    "scan_y",  "position_x",  "position_y",   "thread_id"};

std::string field_label(std::size_t index) {
  return std::string("data header field '") + kFieldNames[index] + "' (index " + std::to_string(index) + ")";
}

std::uint32_t as_u32(const msgpack::object& object, std::size_t index) {
  if (object.type != msgpack::type::POSITIVE_INTEGER) {
    throw ProtocolError(field_label(index) + ": expected an unsigned integer, got " + detail::type_name(object),
                        Refusal::kHeader);
  }
  if (object.via.u64 > std::numeric_limits<std::uint32_t>::max()) {
    throw ProtocolError(field_label(index) + ": expected a value below 2^32, got " + std::to_string(object.via.u64),
                        Refusal::kHeader);
  }
  return static_cast<std::uint32_t>(object.via.u64);
}

// A header is a short array of unsigned integers. The bounds leave room for near misses (a tenth
// field, a string where a number belongs), so that their errors say what was wrong.
const msgpack::unpack_limit kHeaderLimit(/*array=*/64, /*map=*/16, /*str=*/64, /*bin=*/64, /*ext=*/64, /*depth=*/4);

// Unpacks the header and checks everything that does not depend on field values.
msgpack::object_handle unpack_array(const void* data, std::size_t size) {
  msgpack::object_handle handle = detail::unpack_bounded(data, size, kHeaderLimit, "data header", Refusal::kHeader);
  const msgpack::object& root = handle.get();
  if (root.type != msgpack::type::ARRAY) {
    throw ProtocolError(std::string("data header: expected a msgpack array, got ") + detail::type_name(root),
                        Refusal::kHeader);
  }
  if (root.via.array.size != kDataHeaderFields) {
    throw ProtocolError("data header: expected " + std::to_string(kDataHeaderFields) + " fields, got " +
                            std::to_string(root.via.array.size),
                        Refusal::kHeader);
  }
  const std::uint32_t version = as_u32(root.via.array.ptr[kFieldVersion], kFieldVersion);
  if (version != kDataHeaderVersion) {
    throw ProtocolError(field_label(kFieldVersion) + ": expected " + std::to_string(kDataHeaderVersion) +
                            ", got " + std::to_string(version),
                        Refusal::kHeader);
  }
  return handle;
}

}  // namespace

std::string DataHeader::where() const {
  return "scan " + std::to_string(scan_number) + ", frame " + std::to_string(frame_number) + ", sector " +
         std::to_string(sector);
}

bool DataHeader::operator==(const DataHeader& o) const {
  return scan_number == o.scan_number && frame_number == o.frame_number && sector == o.sector &&
         scan_x == o.scan_x && scan_y == o.scan_y && position_x == o.position_x &&
         position_y == o.position_y && thread_id == o.thread_id;
}

std::string encode_header(const DataHeader& h) {
  msgpack::sbuffer buffer(64);
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_array(kDataHeaderFields);
  for (std::uint32_t value : {kDataHeaderVersion, h.scan_number, h.frame_number, h.sector, h.scan_x, h.scan_y,
                              h.position_x, h.position_y, h.thread_id}) {
    packer.pack_uint32(value);
  }
  return std::string(buffer.data(), buffer.size());
}

DataHeader decode_header(const void* data, std::size_t size) {
  const msgpack::object_handle handle = unpack_array(data, size);
  const msgpack::object* f = handle.get().via.array.ptr;
  DataHeader h;
  h.scan_number = as_u32(f[kFieldScanNumber], kFieldScanNumber);
  h.frame_number = as_u32(f[kFieldFrameNumber], kFieldFrameNumber);
  h.sector = as_u32(f[kFieldSector], kFieldSector);
  h.scan_x = as_u32(f[kFieldScanX], kFieldScanX);
  h.scan_y = as_u32(f[kFieldScanY], kFieldScanY);
  h.position_x = as_u32(f[kFieldPositionX], kFieldPositionX);
  h.position_y = as_u32(f[kFieldPositionY], kFieldPositionY);
  h.thread_id = as_u32(f[kFieldThreadId], kFieldThreadId);
  if (h.scan_x == 0 || h.scan_y == 0 || h.scan_x > kMaxScanSide || h.scan_y > kMaxScanSide) {
    throw ProtocolError(h.where() + ": scan shape " + std::to_string(h.scan_x) + " x " + std::to_string(h.scan_y) +
                            " outside 1.." + std::to_string(kMaxScanSide) + " per side",
                        Refusal::kShape);
  }
  if (h.position_x >= h.scan_x || h.position_y >= h.scan_y) {
    throw ProtocolError(h.where() + ": probe position (" + std::to_string(h.position_x) + ", " +
                            std::to_string(h.position_y) + ") lies outside the scan of " + std::to_string(h.scan_x) +
                            " x " + std::to_string(h.scan_y),
                        Refusal::kPosition);
  }
  // Routing is by frame number and assembly by position: a header whose two disagree would put a
  // sector in another frame than its siblings.
  if (h.frame_number != h.position()) {
    throw ProtocolError(h.where() + ": frame number is not the flat probe position " + std::to_string(h.position()) +
                            " = " + std::to_string(h.position_y) + " x " + std::to_string(h.scan_x) + " + " +
                            std::to_string(h.position_x),
                        Refusal::kPosition);
  }
  return h;
}

FrameRef peek_frame(const void* data, std::size_t size) {
  const msgpack::object_handle handle = unpack_array(data, size);
  const msgpack::object* f = handle.get().via.array.ptr;
  return FrameRef{as_u32(f[kFieldScanNumber], kFieldScanNumber), as_u32(f[kFieldFrameNumber], kFieldFrameNumber)};
}

void check_payload(const DataHeader& header, std::size_t payload_bytes, const Geometry& geometry) {
  if (header.sector >= geometry.n_sectors()) {
    throw ProtocolError(header.where() + ": sector index must be below " + std::to_string(geometry.n_sectors()) +
                            " for this geometry",
                        Refusal::kSector);
  }
  if (payload_bytes != geometry.sector_bytes()) {
    throw ProtocolError(header.where() + ": payload of " + std::to_string(payload_bytes) + " bytes, expected " +
                            std::to_string(geometry.sector_bytes()) + " (" + std::to_string(geometry.sector_rows) +
                            " x " + std::to_string(geometry.sector_cols) + " pixels of " +
                            std::to_string(geometry.itemsize) + " bytes)",
                        Refusal::kPayload);
  }
}

DataHeader decode_data(const void* header, std::size_t header_bytes, std::size_t payload_bytes,
                       const DataExpectations& expect) {
  DataHeader h = decode_header(header, header_bytes);
  check_scan_shape(h.scan_x, h.scan_y, expect.limits, h.where());
  if (h.sector != expect.sector) {
    throw ProtocolError(h.where() + ": came on the port of sector " + std::to_string(expect.sector) +
                            " (receiver r sends sector r only)",
                        Refusal::kSector);
  }
  check_payload(h, payload_bytes, expect.geometry);
  return h;
}

}  // namespace sectorflow::protocol
