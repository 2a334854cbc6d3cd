#include "sectorflow/protocol/data_message.hpp"

#include <array>
#include <msgpack.hpp>

#include "msgpack_reader.hpp"
#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::protocol {
namespace {

constexpr const char* kFieldNames[kDataHeaderRunFields] = {
    "version", "scan_number", "frame_number", "sector",     "scan_x",
    "scan_y",  "position_x",  "position_y",   "thread_id", "run"};

// Reads the header's fields and checks its version against its length (9 fields at version 2, 10
// at version 3): what every reading of a header needs first. A version-2 header has run 0.
std::array<std::uint32_t, kDataHeaderRunFields> unpack_fields(const void* data, std::size_t size) {
  std::array<std::uint32_t, kDataHeaderRunFields> f{};
  const std::size_t count = detail::unpack_u32_array(data, size, kFieldNames, kDataHeaderFields,
                                                     kDataHeaderRunFields, f.data(), "data header");
  const std::uint32_t expected = count == kDataHeaderFields ? kDataHeaderVersion : kDataHeaderRunVersion;
  if (f[kFieldVersion] != expected) {
    throw ProtocolError(std::string("data header field 'version' (index 0): expected ") + std::to_string(expected) +
                            ", got " + std::to_string(f[kFieldVersion]) + " (in a header of " +
                            std::to_string(count) + " fields)",
                        Refusal::kHeader);
  }
  return f;
}

}  // namespace

std::string DataHeader::where() const {
  return "scan " + std::to_string(scan_number) + ", frame " + std::to_string(frame_number) + ", sector " +
         std::to_string(sector);
}

bool DataHeader::operator==(const DataHeader& o) const {
  return scan_number == o.scan_number && frame_number == o.frame_number && sector == o.sector &&
         scan_x == o.scan_x && scan_y == o.scan_y && position_x == o.position_x &&
         position_y == o.position_y && thread_id == o.thread_id && run == o.run;
}

std::string encode_header(const DataHeader& h) {
  msgpack::sbuffer buffer(64);
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_array(h.run == 0 ? kDataHeaderFields : kDataHeaderRunFields);
  for (std::uint32_t value : {h.run == 0 ? kDataHeaderVersion : kDataHeaderRunVersion, h.scan_number, h.frame_number,
                              h.sector, h.scan_x, h.scan_y, h.position_x, h.position_y, h.thread_id}) {
    packer.pack_uint32(value);
  }
  if (h.run != 0) packer.pack_uint32(h.run);
  return std::string(buffer.data(), buffer.size());
}

DataHeader decode_header(const void* data, std::size_t size) {
  const std::array<std::uint32_t, kDataHeaderRunFields> f = unpack_fields(data, size);
  DataHeader h;
  h.scan_number = f[kFieldScanNumber];
  h.frame_number = f[kFieldFrameNumber];
  h.sector = f[kFieldSector];
  h.scan_x = f[kFieldScanX];
  h.scan_y = f[kFieldScanY];
  h.position_x = f[kFieldPositionX];
  h.position_y = f[kFieldPositionY];
  h.thread_id = f[kFieldThreadId];
  h.run = f[kFieldRun];
  check_placement(h);
  return h;
}

void check_placement(const DataHeader& h) {
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
}

FrameRef peek_frame(const void* data, std::size_t size) {
  const std::array<std::uint32_t, kDataHeaderRunFields> f = unpack_fields(data, size);
  return FrameRef{f[kFieldScanNumber], f[kFieldFrameNumber]};
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
  const DataHeader h = decode_header(header, header_bytes);
  check_sector(h, payload_bytes, expect);
  return h;
}

void check_sector(const DataHeader& h, std::size_t payload_bytes, const DataExpectations& expect) {
  // The error's text only when it is thrown: this runs for every data message a relay or NodeGroup reads.
  if (!scan_shape_fits(h.scan_x, h.scan_y, expect.limits)) check_scan_shape(h.scan_x, h.scan_y, expect.limits, h.where());
  if (h.sector != expect.sector) {
    throw ProtocolError(h.where() + ": came on the port of sector " + std::to_string(expect.sector) +
                            " (receiver r sends sector r only)",
                        Refusal::kSector);
  }
  check_payload(h, payload_bytes, expect.geometry);
}

}  // namespace sectorflow::protocol
