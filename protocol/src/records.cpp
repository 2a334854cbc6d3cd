#include "sectorflow/protocol/records.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <msgpack.hpp>

#include "msgpack_reader.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/text.hpp"

namespace sectorflow::protocol {
namespace {

using detail::pack_key;
using Packer = msgpack::packer<msgpack::sbuffer>;

static_assert(kNodegroupsPrefix.size() + kMaxUidBytes == kMaxKeyBytes, "a NodeGroup key must fit a kvstore key");

// The fields of each record, in the order encode() writes them: the map sizes are derived from these.
constexpr std::string_view kNodeGroupFields[] = {"version", "uid", "host", "ports", "node", "rank", "status"};
constexpr std::string_view kNodeGroupOptionalFields[] = {"stack_id"};
constexpr std::string_view kStatusFields[] = {"version", "state", "scan", "messages", "bytes", "updated_s"};
constexpr std::string_view kRequestFields[] = {"version", "scan_number", "scan_x", "scan_y", "rate_hz"};
constexpr std::string_view kRequestOptionalFields[] = {"routing", "source", "tier"};

// A record is a small map of short fields: containers up to its longest list, strings up to its
// longest text; limits_for(size) bounds the rest.
const msgpack::unpack_limit kRecordLimit(/*array=*/kMaxRoutingLength + 1, /*map=*/kMaxExtraFields + 16,
                                         /*str=*/kMaxTextBytes * 4, /*bin=*/0, /*ext=*/0, /*depth=*/4);

// Decoding a record: its map, its version, its refusal kind (records are not data messages).
detail::MsgpackMap record_map(std::string_view bytes, const char* what) {
  return detail::MsgpackMap(bytes, what, kRecordLimit, kSchemaVersion, Refusal::kInfo);
}

void check_part(std::string_view part, std::string_view what) {
  if (part.empty() || part.find('/') != std::string_view::npos) {
    throw ProtocolError("kvstore key: " + std::string(what) + " " + shown(part) + " must be non-empty and hold no '/'");
  }
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

void pack_string(Packer& packer, std::string_view value) { pack_key(packer, value); }

std::string bytes_of(const msgpack::sbuffer& buffer) { return std::string(buffer.data(), buffer.size()); }

// Throws "<about>: <size> <unit>, expected at most <max><why>" if size > max.
void check_at_most(const std::string& about, std::size_t size, std::size_t max, std::string_view unit,
                   std::string_view why = {}) {
  if (size > max) {
    throw ProtocolError(about + ": " + std::to_string(size) + " " + std::string(unit) + ", expected at most " +
                       std::to_string(max) + std::string(why));
  }
}

// The bounds encode() and decode() share (schema.hpp, "Bounds").
void check_bounds(const NodeGroupRecord& record) {
  const auto about = [&record](std::string_view field) {
    return "NodeGroupRecord " + shown(record.uid) + ": field '" + std::string(field) + "'";
  };
  check_at_most(about("uid"), record.uid.size(), kMaxUidBytes, "bytes", " (nodegroups/<uid> must fit a key)");
  check_at_most(about("host"), record.host.size(), kMaxNameBytes, "bytes");
  check_at_most(about("ports"), record.ports.size(), kMaxPorts, "ports", " (one per aggregator thread)");
  check_at_most(about("node"), record.node.size(), kMaxNameBytes, "bytes");
  check_at_most(about("status"), record.status.size(), kMaxNameBytes, "bytes");
  if (!parse_service_state(record.status)) {
    throw ProtocolError(about("status") + ": " + shown(record.status) + " is not a service state");
  }
  if (!record.stack_id.empty() && !is_stack_id(record.stack_id)) {
    throw ProtocolError(about("stack_id") + ": " + shown(record.stack_id) + " is not a stack id (" +
                        std::to_string(kStackIdChars) + " lowercase hex digits)");
  }
}

void check_bounds(const ServiceStatus& status) {
  const auto about = [](std::string_view field) { return "ServiceStatus: field " + shown(field); };
  check_at_most(about("state"), status.state.size(), kMaxNameBytes, "bytes");
  if (!status.state.empty() && !parse_service_state(status.state)) {
    throw ProtocolError(about("state") + ": " + shown(status.state) + " is not a service state (starting, idle, "
                        "streaming, writing-to-disk, counting, writing, finished, error, stopping, stopped)");
  }
  check_at_most("ServiceStatus", status.extra.size(), kMaxExtraFields, "extra fields");
  for (const auto& [key, value] : status.extra) {
    check_at_most("ServiceStatus: extra field " + shown(key), key.size(), kMaxNameBytes, "bytes in its name");
  }
}

StatusValue extra_value(const msgpack::object& object, const detail::MsgpackMap& map, const std::string& key) {
  switch (object.type) {
    case msgpack::type::BOOLEAN: return object.via.boolean;
    case msgpack::type::POSITIVE_INTEGER:
      if (object.via.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw ProtocolError(map.about(key) + ": integer " + std::to_string(object.via.u64) + " does not fit int64");
      }
      return static_cast<std::int64_t>(object.via.u64);
    case msgpack::type::NEGATIVE_INTEGER: return object.via.i64;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return object.via.f64;
    case msgpack::type::STR: {
      const std::string_view text(object.via.str.ptr, object.via.str.size);
      check_at_most(map.about(key), text.size(), kMaxTextBytes, "bytes of text");
      if (!valid_utf8(text)) throw ProtocolError(map.about(key) + ": " + shown(text) + " is not valid UTF-8");
      return std::string(text);
    }
    default:
      throw ProtocolError(map.about(key) + ": extra fields hold a bool, integer, float or string, got " +
                         detail::type_name(object));
  }
}

}  // namespace

bool is_stack_id(std::string_view text) {
  if (text.size() != kStackIdChars) return false;
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string nodegroup_key(std::string_view uid) {
  check_part(uid, "NodeGroup uid");
  return std::string(kNodegroupsPrefix) + std::string(uid);
}

std::string status_key(std::string_view service, std::string_view name) {
  check_part(service, "service");
  check_part(name, "service name");
  return std::string(kStatusPrefix) + std::string(service) + "/" + std::string(name);
}

std::string status_prefix(std::string_view service) {
  if (service.empty()) return std::string(kStatusPrefix);
  check_part(service, "service");
  return std::string(kStatusPrefix) + std::string(service) + "/";
}

std::pair<std::string, std::string> parse_status_key(std::string_view key) {
  const std::string_view rest = key.substr(std::min(key.size(), kStatusPrefix.size()));
  const std::size_t slash = rest.find('/');
  if (!starts_with(key, kStatusPrefix) || slash == std::string_view::npos || slash == 0 ||
      slash + 1 == rest.size() || rest.find('/', slash + 1) != std::string_view::npos) {
    throw ProtocolError("kvstore key '" + std::string(key) + "' is not a status key (status/<service>/<name>)");
  }
  return {std::string(rest.substr(0, slash)), std::string(rest.substr(slash + 1))};
}

std::string parse_nodegroup_key(std::string_view key) {
  const std::string_view uid = key.substr(std::min(key.size(), kNodegroupsPrefix.size()));
  if (!starts_with(key, kNodegroupsPrefix) || uid.empty() || uid.find('/') != std::string_view::npos) {
    throw ProtocolError("kvstore key '" + std::string(key) + "' is not a NodeGroup key (nodegroups/<uid>)");
  }
  return std::string(uid);
}

// ---------------------------------------------------------------------------------------------
// NodeGroupRecord

std::string NodeGroupRecord::endpoint(std::size_t thread) const {
  if (thread >= ports.size()) {
    throw ProtocolError("NodeGroup '" + uid + "' has " + std::to_string(ports.size()) +
                       " ports, none for aggregator thread " + std::to_string(thread) +
                       " (the NodeGroup needs one port per aggregator thread)");
  }
  return "tcp://" + host + ":" + std::to_string(ports[thread]);
}

std::string NodeGroupRecord::encode() const {
  check_part(uid, "NodeGroup uid");
  check_bounds(*this);
  msgpack::sbuffer buffer(128);
  Packer packer(buffer);
  // The optional stack_id is written only when known, so that a record without it encodes to the
  // bytes it had before the field existed.
  const bool with_stack = !stack_id.empty();
  packer.pack_map(static_cast<std::uint32_t>(std::size(kNodeGroupFields)) + (with_stack ? 1U : 0U));
  pack_key(packer, "version");
  packer.pack_uint32(kSchemaVersion);
  pack_key(packer, "uid");
  pack_string(packer, uid);
  pack_key(packer, "host");
  pack_string(packer, host);
  pack_key(packer, "ports");
  packer.pack_array(static_cast<std::uint32_t>(ports.size()));
  for (const std::uint16_t port : ports) packer.pack_uint16(port);
  pack_key(packer, "node");
  pack_string(packer, node);
  pack_key(packer, "rank");
  packer.pack_uint32(rank);
  pack_key(packer, "status");
  pack_string(packer, status);
  if (with_stack) {
    pack_key(packer, "stack_id");
    pack_string(packer, stack_id);
  }
  return bytes_of(buffer);
}

NodeGroupRecord NodeGroupRecord::decode(std::string_view bytes) {
  detail::MsgpackMap map = record_map(bytes, "NodeGroupRecord");
  NodeGroupRecord record;
  record.uid = map.string("uid");
  map.name(record.uid);
  std::vector<std::string_view> known(std::begin(kNodeGroupFields), std::end(kNodeGroupFields));
  known.insert(known.end(), std::begin(kNodeGroupOptionalFields), std::end(kNodeGroupOptionalFields));
  map.reject_unknown(known);
  record.host = map.string("host", kMaxNameBytes);
  record.ports = map.ports("ports", kMaxPorts);
  record.node = map.string("node", kMaxNameBytes);
  record.rank = static_cast<std::uint32_t>(map.unsigned_int("rank", std::numeric_limits<std::uint32_t>::max()));
  record.status = map.string("status", kMaxNameBytes);
  // Present means known: a writer that had not synced leaves it out rather than writing "".
  if (map.has("stack_id")) {
    record.stack_id = map.string("stack_id", kStackIdChars);
    if (record.stack_id.empty()) {
      map.fail(map.about("stack_id") + ": empty; a writer that knows no stack leaves the field out");
    }
  }
  if (record.uid.empty() || record.uid.find('/') != std::string::npos) {
    throw ProtocolError(map.about("uid") + ": must be non-empty and hold no '/'");
  }
  check_bounds(record);
  if (record.host.empty()) throw ProtocolError(map.about("host") + ": empty; the NodeGroup must say where it listens");
  if (record.ports.empty()) throw ProtocolError(map.about("ports") + ": empty; one port per aggregator thread");
  return record;
}

bool NodeGroupRecord::operator==(const NodeGroupRecord& o) const {
  return uid == o.uid && host == o.host && ports == o.ports && node == o.node && rank == o.rank && status == o.status &&
         stack_id == o.stack_id;
}

NodeGroupList nodegroups_from(const std::map<std::string, std::string>& entries) {
  NodeGroupList list;
  for (const auto& [key, value] : entries) {
    try {
      const std::string uid = parse_nodegroup_key(key);
      NodeGroupRecord record = NodeGroupRecord::decode(value);
      if (record.uid != uid) throw ProtocolError("holds the record of uid " + shown(record.uid));
      list.records.push_back(std::move(record));
    } catch (const ProtocolError& error) {
      list.rejected.emplace(key, error.what());
    }
  }
  std::sort(list.records.begin(), list.records.end(), [](const auto& a, const auto& b) { return a.uid < b.uid; });
  return list;
}

// ---------------------------------------------------------------------------------------------
// ServiceStatus

std::string ServiceStatus::encode() const {
  if (state.empty()) throw ProtocolError("ServiceStatus: empty state; say what the service is doing, e.g. 'idle'");
  check_bounds(*this);
  for (const auto& [key, value] : extra) {
    if (std::find(std::begin(kStatusFields), std::end(kStatusFields), key) != std::end(kStatusFields)) {
      throw ProtocolError("ServiceStatus: extra field " + shown(key) + " reuses a standard field name");
    }
  }
  msgpack::sbuffer buffer(128);
  Packer packer(buffer);
  packer.pack_map(static_cast<std::uint32_t>(std::size(kStatusFields) + extra.size()));
  pack_key(packer, "version");
  packer.pack_uint32(kSchemaVersion);
  pack_key(packer, "state");
  pack_string(packer, state);
  pack_key(packer, "scan");
  packer.pack_uint32(scan);
  pack_key(packer, "messages");
  packer.pack_uint64(messages);
  pack_key(packer, "bytes");
  packer.pack_uint64(bytes);
  pack_key(packer, "updated_s");
  detail::pack_float64(buffer, updated_s != 0.0 ? updated_s : wall_clock_s());
  for (const auto& [key, value] : extra) {
    pack_key(packer, key);
    std::visit(
        [&packer, &buffer](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            v ? packer.pack_true() : packer.pack_false();
          } else if constexpr (std::is_same_v<T, std::int64_t>) {
            packer.pack_int64(v);
          } else if constexpr (std::is_same_v<T, double>) {
            detail::pack_float64(buffer, v);
          } else {
            // Cut, not refused: this may be the error message of a failing service (schema.hpp).
            pack_string(packer, cut_text(v, kMaxTextBytes));
          }
        },
        value);
  }
  return bytes_of(buffer);
}

ServiceStatus ServiceStatus::decode(std::string_view bytes) {
  detail::MsgpackMap map = record_map(bytes, "ServiceStatus");
  ServiceStatus status;
  status.state = map.string("state", kMaxNameBytes);
  // What encode() refuses is no status either (found by tests/fuzz/fuzz_service_status).
  if (status.state.empty()) {
    throw ProtocolError(map.about("state") + ": empty state; a status says what the service is doing");
  }
  status.scan = static_cast<std::uint32_t>(map.unsigned_int("scan", std::numeric_limits<std::uint32_t>::max()));
  status.messages = map.unsigned_int("messages", std::numeric_limits<std::uint64_t>::max());
  status.bytes = map.unsigned_int("bytes", std::numeric_limits<std::uint64_t>::max());
  status.updated_s = map.number("updated_s");
  // The standard fields are all present now (or we threw): the others are the extra ones.
  check_at_most("ServiceStatus", map.fields().size() - std::size(kStatusFields), kMaxExtraFields, "extra fields");
  for (const auto& [key, object] : map.fields()) {
    if (std::find(std::begin(kStatusFields), std::end(kStatusFields), key) == std::end(kStatusFields)) {
      status.extra[key] = extra_value(*object, map, key);
    }
  }
  check_bounds(status);
  return status;
}

bool ServiceStatus::operator==(const ServiceStatus& o) const {
  return state == o.state && scan == o.scan && messages == o.messages && bytes == o.bytes &&
         updated_s == o.updated_s && extra == o.extra;
}

// ---------------------------------------------------------------------------------------------
// AcquireRequest

void check_tier(const std::string& what, const std::vector<std::uint32_t>& tier) {
  check_at_most(what, tier.size(), kMaxTier, "aggregators");
  for (std::size_t i = 0; i < tier.size(); ++i) {
    if (tier[i] >= kMaxTier || (i > 0 && !(tier[i - 1] < tier[i]))) {
      throw ProtocolError(what + ": members must be ascending, without duplicates, below " +
                          std::to_string(kMaxTier) + " (member " + std::to_string(tier[i]) + " at " +
                          std::to_string(i) + ")");
    }
  }
}

namespace {

void check_request(const AcquireRequest& request) {
  const std::string what = "AcquireRequest scan " + std::to_string(request.scan_number);
  if (request.scan_x == 0 || request.scan_y == 0) {
    throw ProtocolError(what + ": scan shape " + std::to_string(request.scan_x) + " x " +
                       std::to_string(request.scan_y) + " is empty; expected at least 1 x 1");
  }
  check_at_most(what + ": field 'scan_x'", request.scan_x, kMaxScanSide, "positions");
  check_at_most(what + ": field 'scan_y'", request.scan_y, kMaxScanSide, "positions");
  if (!(request.rate_hz >= 0.0) || !std::isfinite(request.rate_hz)) {
    throw ProtocolError("AcquireRequest scan " + std::to_string(request.scan_number) + ": rate_hz " +
                       std::to_string(request.rate_hz) + " is negative or not finite; 0 means as fast as possible");
  }
  if (request.source != kSourceSimulator && request.source != kSourceReplay) {
    throw ProtocolError(what + ": source " + shown(request.source) + " is unknown; expected 'simulator' or 'replay'");
  }
  check_tier(what + ": field 'tier'", request.tier);
  if (request.routing) {
    const std::vector<std::string>& uids = *request.routing;
    check_at_most(what + ": field 'routing'", uids.size(), kMaxRoutingLength, "NodeGroups");
    for (std::size_t i = 0; i < uids.size(); ++i) {
      if (uids[i].empty() || uids[i].find('/') != std::string::npos) {
        throw ProtocolError(what + ": routing uid " + shown(uids[i]) + " must be non-empty and hold no '/'");
      }
      check_at_most(what + ": routing uid " + shown(uids[i]), uids[i].size(), kMaxUidBytes, "bytes");
      if (i > 0 && !(uids[i - 1] < uids[i])) {
        throw ProtocolError(what + ": routing list is not sorted without duplicates (" + shown(uids[i - 1]) +
                           " before " + shown(uids[i]) + ")");
      }
    }
  }
}

}  // namespace

std::string AcquireRequest::encode() const {
  check_request(*this);
  msgpack::sbuffer buffer(64);
  Packer packer(buffer);
  // Optional fields are written only when they say more than their absence (see schema.hpp), so a
  // request of the original five fields encodes to the original bytes.
  const bool replay = source != kSourceSimulator;
  packer.pack_map(static_cast<std::uint32_t>(std::size(kRequestFields)) + (routing ? 1U : 0U) + (replay ? 1U : 0U) +
                  (tier.empty() ? 0U : 1U));
  pack_key(packer, "version");
  packer.pack_uint32(kSchemaVersion);
  pack_key(packer, "scan_number");
  packer.pack_uint32(scan_number);
  pack_key(packer, "scan_x");
  packer.pack_uint32(scan_x);
  pack_key(packer, "scan_y");
  packer.pack_uint32(scan_y);
  pack_key(packer, "rate_hz");
  detail::pack_float64(buffer, rate_hz);
  if (routing) {
    pack_key(packer, "routing");
    packer.pack_array(static_cast<std::uint32_t>(routing->size()));
    for (const std::string& uid : *routing) pack_string(packer, uid);
  }
  if (replay) {
    pack_key(packer, "source");
    pack_string(packer, source);
  }
  if (!tier.empty()) {
    pack_key(packer, "tier");
    packer.pack_array(static_cast<std::uint32_t>(tier.size()));
    for (const std::uint32_t member : tier) packer.pack_uint32(member);
  }
  return bytes_of(buffer);
}

AcquireRequest AcquireRequest::decode(std::string_view bytes) {
  detail::MsgpackMap map = record_map(bytes, "AcquireRequest");
  std::vector<std::string_view> known(std::begin(kRequestFields), std::end(kRequestFields));
  known.insert(known.end(), std::begin(kRequestOptionalFields), std::end(kRequestOptionalFields));
  map.reject_unknown(known);
  constexpr std::uint64_t kU32 = std::numeric_limits<std::uint32_t>::max();
  AcquireRequest request;
  request.scan_number = static_cast<std::uint32_t>(map.unsigned_int("scan_number", kU32));
  request.scan_x = static_cast<std::uint32_t>(map.unsigned_int("scan_x", kU32));
  request.scan_y = static_cast<std::uint32_t>(map.unsigned_int("scan_y", kU32));
  request.rate_hz = map.number("rate_hz");
  if (map.has("routing")) request.routing = map.strings("routing", kMaxRoutingLength, kMaxUidBytes);
  if (map.has("source")) request.source = map.string("source", kMaxNameBytes);
  if (map.has("tier")) {
    for (const std::uint64_t member : map.unsigned_ints("tier", kMaxTier, kMaxTier - 1)) {
      request.tier.push_back(static_cast<std::uint32_t>(member));
    }
  }
  check_request(request);
  return request;
}

bool AcquireRequest::operator==(const AcquireRequest& o) const {
  return scan_number == o.scan_number && scan_x == o.scan_x && scan_y == o.scan_y && rate_hz == o.rate_hz &&
         routing == o.routing && source == o.source && tier == o.tier;
}

double wall_clock_s() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace sectorflow::protocol
