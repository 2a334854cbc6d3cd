// Fuzz target: the data message header (protocol/data_message.hpp), as a receiver gets it from
// any peer. The input is the header frame. Properties:
//   - decode_header, peek_frame and check_payload throw nothing but ProtocolError;
//   - peek_frame checks a subset of decode_header: it accepts whatever decode_header accepts, and
//     reads the same scan and frame numbers;
//   - a decoded header encodes and decodes back to itself;
//   - check_payload accepts exactly one sector of a sector that exists in the geometry.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "property.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"

namespace sp = sectorflow::protocol;
using sectorflow::fuzz::require;

namespace {

bool payload_accepted(const sp::DataHeader& header, std::size_t bytes, const sp::Geometry& geometry) {
  try {
    sp::check_payload(header, bytes, geometry);
    return true;
  } catch (const sp::ProtocolError&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<sp::DataHeader> header;
  try {
    header = sp::decode_header(data, size);
  } catch (const sp::ProtocolError&) {
  }
  std::optional<sp::FrameRef> frame;
  try {
    frame = sp::peek_frame(data, size);
  } catch (const sp::ProtocolError&) {
  }
  if (!header) return 0;

  require(frame.has_value(), "peek_frame refused a header that decode_header accepted");
  require(frame->scan_number == header->scan_number && frame->frame_number == header->frame_number,
          "peek_frame read another scan or frame number than decode_header");
  const std::string encoded = sp::encode_header(*header);
  require(sp::decode_header(encoded.data(), encoded.size()) == *header, "decode(encode(header)) differs");

  const sp::Geometry geometry{576, 576, 144, 576, 2};  // the 4D Camera's: 4 sectors of 144 x 576 uint16
  const bool sector_exists = header->sector < geometry.n_sectors();
  require(payload_accepted(*header, geometry.sector_bytes(), geometry) == sector_exists,
          "check_payload disagrees about a whole sector");
  require(!payload_accepted(*header, geometry.sector_bytes() - 1, geometry), "check_payload took a short sector");
  require(!payload_accepted(*header, size, geometry) || size == geometry.sector_bytes(),
          "check_payload took a payload of another size");
  return 0;
}
