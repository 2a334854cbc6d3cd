// Fuzz target: the kvmsg frames of the Clone pattern (kvstore/kvmsg.hpp), as the kvstore server
// and every client agent get them from any peer. The input is split into frames by the scheme of
// frames.hpp (4-byte big-endian length, then the bytes: tests/data/*.frames are seeds as they are).
// Properties:
//   - decode_kvmsg, decode_properties, check_msgpack and KvMsg::ttl_s throw nothing but
//     KvstoreError, whatever the frames;
//   - a decoded message encodes (without throwing) and decodes back to itself, and its properties
//     are those decode_properties reads from the properties frame;
//   - a ttl that decodes sets back to the same property value of seconds.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frames.hpp"
#include "property.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"

namespace kv = sectorflow::kvstore;
using sectorflow::fuzz::require;

namespace {

void check_ttl(const kv::KvMsg& msg) {
  double ttl_s = 0.0;
  try {
    ttl_s = msg.ttl_s();
  } catch (const kv::KvstoreError&) {
    return;
  }
  kv::KvMsg copy = msg;
  copy.set_ttl_s(ttl_s);
  require(copy.ttl_s() == ttl_s, "set_ttl_s(ttl_s()) changed the ttl");
  require((ttl_s == 0.0) == (copy.properties.count(std::string(kv::kTtlProperty)) == 0),
          "a ttl of 0 s must be no ttl property, any other a property");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string_view> frames = sectorflow::fuzz::split_frames(data, size);
  for (const std::string_view frame : frames) {
    try {
      kv::check_msgpack(frame);
    } catch (const kv::KvstoreError&) {
    }
    try {
      (void)kv::decode_properties(frame);
    } catch (const kv::KvstoreError&) {
    }
  }

  std::optional<kv::KvMsg> msg;
  try {
    msg = kv::decode_kvmsg(frames);
  } catch (const kv::KvstoreError&) {
    return 0;
  }
  require(msg->properties == kv::decode_properties(frames[kv::kFrameProperties]),
          "decode_kvmsg and decode_properties read the properties frame differently");
  const std::vector<std::string> encoded = kv::encode_kvmsg(*msg);
  require(kv::decode_kvmsg(std::vector<std::string_view>(encoded.begin(), encoded.end())) == *msg,
          "decode(encode(kvmsg)) differs");
  check_ttl(*msg);
  return 0;
}
