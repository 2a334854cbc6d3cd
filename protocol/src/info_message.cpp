#include "sectorflow/protocol/info_message.hpp"

#include <algorithm>
#include <limits>
#include <msgpack.hpp>
#include <set>

#include "msgpack_limits.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::protocol {
namespace {

constexpr const char* kKeys[] = {"version", "kind",    "scan_number", "receiver", "thread_id",
                                 "scan_x",  "scan_y",  "routing",     "counts"};

// An info message holds a few named fields, a routing list and a count per uid: containers
// bounded by the longest routing list, strings by the longest uid.
const msgpack::unpack_limit kInfoLimit(/*array=*/kMaxRoutingLength, /*map=*/kMaxRoutingLength + 16,
                                       /*str=*/kMaxUidBytes, /*bin=*/0, /*ext=*/0, /*depth=*/4);

std::string label(const std::string& key) { return "info message key '" + key + "'"; }

ProtocolError info_error(const std::string& what) { return ProtocolError(what, Refusal::kInfo); }

std::uint64_t as_uint(const msgpack::object& object, const std::string& key, std::uint64_t max) {
  if (object.type != msgpack::type::POSITIVE_INTEGER) {
    throw info_error(label(key) + ": expected an unsigned integer");
  }
  if (object.via.u64 > max) {
    throw info_error(label(key) + ": value " + std::to_string(object.via.u64) + " out of range");
  }
  return object.via.u64;
}

std::uint32_t as_u32(const msgpack::object& object, const std::string& key) {
  return static_cast<std::uint32_t>(as_uint(object, key, std::numeric_limits<std::uint32_t>::max()));
}

std::string as_string(const msgpack::object& object, const std::string& what) {
  if (object.type != msgpack::type::STR) throw info_error(what + ": expected a string");
  return std::string(object.via.str.ptr, object.via.str.size);
}

}  // namespace

bool InfoMessage::operator==(const InfoMessage& o) const {
  return scan_number == o.scan_number && receiver == o.receiver && thread_id == o.thread_id &&
         scan_x == o.scan_x && scan_y == o.scan_y && routing == o.routing && counts == o.counts;
}

std::string encode_info(const InfoMessage& info) {
  msgpack::sbuffer buffer(256);
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_map(9);
  packer.pack(std::string("version"));
  packer.pack_uint32(kInfoVersion);
  packer.pack(std::string("kind"));
  packer.pack(std::string("info"));
  packer.pack(std::string("scan_number"));
  packer.pack_uint32(info.scan_number);
  packer.pack(std::string("receiver"));
  packer.pack_uint32(info.receiver);
  packer.pack(std::string("thread_id"));
  packer.pack_uint32(info.thread_id);
  packer.pack(std::string("scan_x"));
  packer.pack_uint32(info.scan_x);
  packer.pack(std::string("scan_y"));
  packer.pack_uint32(info.scan_y);
  packer.pack(std::string("routing"));
  packer.pack(info.routing);
  packer.pack(std::string("counts"));
  packer.pack_map(static_cast<std::uint32_t>(info.counts.size()));
  for (const auto& [uid, count] : info.counts) {
    packer.pack(uid);
    packer.pack_uint64(count);
  }
  return std::string(buffer.data(), buffer.size());
}

InfoMessage decode_info(const void* data, std::size_t size) {
  if (size > kMaxInfoBytes) {
    throw info_error("info message: " + std::to_string(size) + " bytes, more than the " +
                     std::to_string(kMaxInfoBytes) + " allowed");
  }
  const msgpack::object_handle handle = detail::unpack_bounded(data, size, kInfoLimit, "info message", Refusal::kInfo);
  const msgpack::object& root = handle.get();
  if (root.type != msgpack::type::MAP) throw info_error("info message: expected a msgpack map");

  std::map<std::string, const msgpack::object*> fields;
  for (std::uint32_t i = 0; i < root.via.map.size; ++i) {
    const auto& kv = root.via.map.ptr[i];
    fields[as_string(kv.key, "info message key")] = &kv.val;
  }
  for (const char* key : kKeys) {
    if (fields.count(key) == 0) throw info_error(std::string("info message: missing key '") + key + "'");
  }
  const std::uint32_t version = as_u32(*fields["version"], "version");
  if (version != kInfoVersion) {
    throw info_error(label("version") + ": expected " + std::to_string(kInfoVersion) + ", got " +
                        std::to_string(version));
  }
  const std::string kind = as_string(*fields["kind"], label("kind"));
  if (kind != "info") throw info_error(label("kind") + ": expected 'info', got '" + kind + "'");

  InfoMessage info;
  info.scan_number = as_u32(*fields["scan_number"], "scan_number");
  info.receiver = as_u32(*fields["receiver"], "receiver");
  info.thread_id = as_u32(*fields["thread_id"], "thread_id");
  info.scan_x = as_u32(*fields["scan_x"], "scan_x");
  info.scan_y = as_u32(*fields["scan_y"], "scan_y");
  const std::string where = "info message of scan " + std::to_string(info.scan_number);
  if (info.scan_x == 0 || info.scan_y == 0 || info.scan_x > kMaxScanSide || info.scan_y > kMaxScanSide) {
    throw info_error(where + ": scan shape " + std::to_string(info.scan_x) + " x " + std::to_string(info.scan_y) +
                     " outside 1.." + std::to_string(kMaxScanSide) + " per side");
  }

  const msgpack::object& routing = *fields["routing"];
  if (routing.type != msgpack::type::ARRAY) throw info_error(label("routing") + ": expected an array of UIDs");
  for (std::uint32_t i = 0; i < routing.via.array.size; ++i) {
    std::string uid = as_string(routing.via.array.ptr[i], label("routing"));
    if (uid.empty() || uid.find('/') != std::string::npos) {
      throw info_error(label("routing") + ": uid '" + uid + "' must be non-empty and hold no '/' (scan " +
                       std::to_string(info.scan_number) + ")");
    }
    info.routing.push_back(std::move(uid));
  }
  if (!std::is_sorted(info.routing.begin(), info.routing.end()) ||
      std::adjacent_find(info.routing.begin(), info.routing.end()) != info.routing.end()) {
    throw info_error(label("routing") + ": expected sorted UIDs without duplicates (scan " +
                        std::to_string(info.scan_number) + ")");
  }
  const std::set<std::string> known(info.routing.begin(), info.routing.end());

  const std::uint64_t positions = std::uint64_t{info.scan_x} * info.scan_y;
  std::uint64_t total = 0;
  const msgpack::object& counts = *fields["counts"];
  if (counts.type != msgpack::type::MAP) throw info_error(label("counts") + ": expected a map UID -> count");
  for (std::uint32_t i = 0; i < counts.via.map.size; ++i) {
    const auto& kv = counts.via.map.ptr[i];
    std::string uid = as_string(kv.key, label("counts"));
    if (known.count(uid) == 0) {
      throw info_error(label("counts") + ": UID '" + uid + "' is not in the routing list (scan " +
                          std::to_string(info.scan_number) + ")");
    }
    info.counts[uid] = as_uint(kv.val, "counts", positions);
    total += info.counts[uid];
  }
  // A producer thread sends at most one message per probe position.
  if (total > positions) {
    throw info_error(label("counts") + ": " + std::to_string(total) + " messages announced for a scan of " +
                     std::to_string(positions) + " positions (scan " + std::to_string(info.scan_number) + ")");
  }
  return info;
}

}  // namespace sectorflow::protocol
