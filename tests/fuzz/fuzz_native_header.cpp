// Fuzz target: the 4D Camera receivers' native header (protocol/native_header.hpp), as a native
// receiver's relay thread gets it from any peer. The input is the header frame. Properties:
//   - decode_native_header and decode_native_data throw nothing but ProtocolError;
//   - decode_native_data checks a superset of decode_native_header: what it accepts, the header
//     decoder accepts alike;
//   - a decoded header encodes and decodes back to itself, and its SFSP header (what the relay
//     forwards) decodes as SFSP with the same scan, frame, place and thread, and back to it.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "property.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/native_header.hpp"

namespace sp = sectorflow::protocol;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<sp::NativeHeader> header;
  try {
    header = sp::decode_native_header(data, size);
  } catch (const sp::ProtocolError&) {
  }
  const sp::Geometry geometry{576, 576, 144, 576, 2};  // the 4D Camera's: 4 sectors of 144 x 576 uint16
  std::optional<sp::NativeHeader> checked;
  try {
    checked = sp::decode_native_data(data, size, geometry.sector_bytes(),
                                     sp::NativeExpectations{{geometry, {1u << 22}, 1}, 4});
  } catch (const sp::ProtocolError&) {
  }
  if (checked) require(header.has_value() && *header == *checked, "decode_native_data took what the header decoder refused");
  if (!header) return 0;

  const std::string encoded = sp::encode_native_header(*header);
  require(sp::decode_native_header(encoded.data(), encoded.size()) == *header, "decode(encode(native header)) differs");
  const sp::DataHeader forwarded = sp::to_data_header(*header);
  const std::string sfsp = sp::encode_header(forwarded);
  const sp::DataHeader relayed = sp::decode_header(sfsp.data(), sfsp.size());
  require(relayed == forwarded, "the forwarded SFSP header does not decode to itself");
  require(sp::to_native_header(relayed, header->frames_this_thread) == *header,
          "native -> SFSP -> native differs");
  return 0;
}
