#include "sectorflow/protocol/info_message.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <msgpack.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "msgpack_reader.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/limits.hpp"
#include "sectorflow/protocol/text.hpp"

namespace sectorflow::protocol {
namespace {

// The fields of an info message, in the order encode_info() writes them.
constexpr std::string_view kFields[] = {"version", "kind",   "scan_number", "receiver", "thread_id",
                                        "scan_x",  "scan_y", "routing",     "counts"};
constexpr std::string_view kKind = "info";

// An info message holds a few named fields, a routing list and a count per uid: containers
// bounded by the longest routing list, strings by the longest uid.
const msgpack::unpack_limit kInfoLimit(/*array=*/kMaxRoutingLength, /*map=*/kMaxRoutingLength + 16,
                                       /*str=*/kMaxUidBytes, /*bin=*/0, /*ext=*/0, /*depth=*/4);

ProtocolError info_error(const std::string& what) { return ProtocolError(what, Refusal::kInfo); }

void pack_string(msgpack::packer<msgpack::sbuffer>& packer, std::string_view text) { detail::pack_key(packer, text); }

}  // namespace

bool InfoMessage::operator==(const InfoMessage& o) const {
  return scan_number == o.scan_number && receiver == o.receiver && thread_id == o.thread_id &&
         scan_x == o.scan_x && scan_y == o.scan_y && routing == o.routing && counts == o.counts && run == o.run;
}

std::string encode_info(const InfoMessage& info) {
  msgpack::sbuffer buffer(256);
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_map(static_cast<std::uint32_t>(std::size(kFields) + (info.run != 0 ? 1 : 0)));
  pack_string(packer, "version");
  packer.pack_uint32(kInfoVersion);
  pack_string(packer, "kind");
  pack_string(packer, kKind);
  const std::pair<std::string_view, std::uint32_t> numbers[] = {{"scan_number", info.scan_number},
                                                                {"receiver", info.receiver},
                                                                {"thread_id", info.thread_id},
                                                                {"scan_x", info.scan_x},
                                                                {"scan_y", info.scan_y}};
  for (const auto& [field, value] : numbers) {
    pack_string(packer, field);
    packer.pack_uint32(value);
  }
  pack_string(packer, "routing");
  packer.pack_array(static_cast<std::uint32_t>(info.routing.size()));
  for (const std::string& uid : info.routing) pack_string(packer, uid);
  pack_string(packer, "counts");
  packer.pack_map(static_cast<std::uint32_t>(info.counts.size()));
  for (const auto& [uid, count] : info.counts) {
    pack_string(packer, uid);
    packer.pack_uint64(count);
  }
  if (info.run != 0) {
    pack_string(packer, "run");
    packer.pack_uint32(info.run);
  }
  return std::string(buffer.data(), buffer.size());
}

InfoMessage decode_info(const void* data, std::size_t size) {
  if (size > kMaxInfoBytes) {
    throw info_error("info message: " + std::to_string(size) + " bytes, more than the " +
                     std::to_string(kMaxInfoBytes) + " allowed");
  }
  const detail::MsgpackMap map(std::string_view(static_cast<const char*>(data), size), "info message", kInfoLimit,
                               kInfoVersion, Refusal::kInfo);
  const std::string kind = map.string("kind");
  if (kind != kKind) map.fail(map.about("kind") + ": expected 'info', got " + shown(kind));

  constexpr std::uint64_t kU32 = std::numeric_limits<std::uint32_t>::max();
  InfoMessage info;
  info.scan_number = static_cast<std::uint32_t>(map.unsigned_int("scan_number", kU32));
  info.receiver = static_cast<std::uint32_t>(map.unsigned_int("receiver", kU32));
  info.thread_id = static_cast<std::uint32_t>(map.unsigned_int("thread_id", kU32));
  info.scan_x = static_cast<std::uint32_t>(map.unsigned_int("scan_x", kU32));
  info.scan_y = static_cast<std::uint32_t>(map.unsigned_int("scan_y", kU32));
  if (map.has("run")) info.run = static_cast<std::uint32_t>(map.unsigned_int("run", kU32));
  const std::string scan = " (scan " + std::to_string(info.scan_number) + ")";
  if (info.scan_x == 0 || info.scan_y == 0 || info.scan_x > kMaxScanSide || info.scan_y > kMaxScanSide) {
    throw info_error("info message of scan " + std::to_string(info.scan_number) + ": scan shape " +
                     std::to_string(info.scan_x) + " x " + std::to_string(info.scan_y) + " outside 1.." +
                     std::to_string(kMaxScanSide) + " per side");
  }

  info.routing = map.strings("routing", kMaxRoutingLength, kMaxUidBytes);
  for (const std::string& uid : info.routing) {
    if (uid.empty() || uid.find('/') != std::string::npos) {
      map.fail(map.about("routing") + ": uid " + shown(uid) + " must be non-empty and hold no '/'" + scan);
    }
  }
  if (!std::is_sorted(info.routing.begin(), info.routing.end()) ||
      std::adjacent_find(info.routing.begin(), info.routing.end()) != info.routing.end()) {
    map.fail(map.about("routing") + ": expected sorted UIDs without duplicates" + scan);
  }

  // A producer thread sends at most one message per probe position.
  const std::uint64_t positions = std::uint64_t{info.scan_x} * info.scan_y;
  info.counts = map.counts("counts", kMaxRoutingLength, kMaxUidBytes, positions);
  std::uint64_t total = 0;
  for (const auto& [uid, count] : info.counts) {
    if (!std::binary_search(info.routing.begin(), info.routing.end(), uid)) {
      map.fail(map.about("counts") + ": UID " + shown(uid) + " is not in the routing list" + scan);
    }
    total += count;
  }
  if (total > positions) {
    map.fail(map.about("counts") + ": " + std::to_string(total) + " messages announced for a scan of " +
             std::to_string(positions) + " positions" + scan);
  }
  return info;
}

}  // namespace sectorflow::protocol
