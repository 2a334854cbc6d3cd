#include "sectorflow/protocol/scan_records.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <numeric>

#include "msgpack_reader.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/limits.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/protocol/service_state.hpp"
#include "sectorflow/protocol/text.hpp"

namespace sectorflow::protocol {
namespace {

constexpr std::uint64_t kU64 = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kU32 = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kI64 = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
/// Parts written beside a scan's file: a few late parts at most, or something is wrong upstream.
constexpr std::size_t kMaxExtraPaths = 16;

// The fields of each record, in the order encode() writes them: the map sizes are derived from these.
constexpr std::string_view kRequestFields[] = {"version", "scan_number", "scan_x", "scan_y", "source",
                                               "routing", "producer_threads", "requested_s",
                                               "tier"};
constexpr std::string_view kProducerFields[] = {"version", "receiver", "thread", "state", "routing", "counts",
                                                "owned", "lost_upstream", "sent", "spilled", "spill_file",
                                                "partial", "error", "updated_s", "tier_counts", "tier_sent"};
constexpr std::string_view kRelayFields[] = {"version", "thread", "complete", "forwarded", "lost", "dead",
                                             "updated_s", "run"};
constexpr std::string_view kNodeGroupFields[] = {"version", "uid", "expected", "received", "frames_complete",
                                                 "frames_incomplete", "sectors_counted", "late", "duplicates",
                                                 "timed_out", "updated_s", "runs"};
/// The fields of one run of "runs" in a NodeGroup record: [port, run, expected, received].
constexpr std::size_t kPortRunWidth = 4;
constexpr std::string_view kFileFields[] = {"version", "outcome", "path", "extra_paths", "positions",
                                            "frames_written", "positions_missing", "sectors_counted", "reason",
                                            "written_s"};

// A scan record holds lists as long as a routing list and texts as long as a status's.
const msgpack::unpack_limit kScanRecordLimit(/*array=*/kMaxRoutingLength, /*map=*/kMaxRoutingLength + 16,
                                             /*str=*/kMaxTextBytes, /*bin=*/0, /*ext=*/0, /*depth=*/4);

template <std::size_t N>
detail::MsgpackMap record_map(std::string_view bytes, const char* what, const std::string_view (&fields)[N]) {
  detail::MsgpackMap map(bytes, what, kScanRecordLimit, kSchemaVersion, Refusal::kInfo);
  map.reject_unknown({std::begin(fields), std::end(fields)});
  return map;
}

std::uint32_t u32(const detail::MsgpackMap& map, const char* key) {
  return static_cast<std::uint32_t>(map.unsigned_int(key, kU32));
}

/// A Unix time in seconds: finite (a NaN would also make a record unequal to itself).
double seconds(const detail::MsgpackMap& map, const char* key) {
  const double value = map.number(key);
  if (!std::isfinite(value)) map.fail(map.about(key) + ": not a finite time (NaN or infinite)");
  return value;
}

void check_uids(const detail::MsgpackMap& map, const char* key, const std::vector<std::string>& uids) {
  for (const std::string& uid : uids) {
    if (uid.empty() || uid.find('/') != std::string::npos) {
      map.fail(map.about(key) + ": uid " + shown(uid) + " must be non-empty and hold no '/'");
    }
  }
}

void check_size(const std::string& what, std::size_t size, std::size_t max) {
  if (size > max) {
    throw ProtocolError(what + ": " + std::to_string(size) + ", expected at most " + std::to_string(max));
  }
}

std::string padded(std::uint32_t scan) {
  char digits[11];
  std::snprintf(digits, sizeof digits, "%010u", scan);
  return digits;
}

}  // namespace

std::string scan_prefix(std::uint32_t scan) { return std::string(kScansPrefix) + padded(scan) + "/"; }

std::uint32_t parse_scan_key(std::string_view key) {
  const std::string_view rest = key.substr(std::min(key.size(), kScansPrefix.size()));
  if (key.substr(0, kScansPrefix.size()) != kScansPrefix || rest.size() < 11 || rest[10] != '/') {
    throw ProtocolError("kvstore key " + shown(key) + " is not under a scan (scans/<scan:010d>/...)");
  }
  std::uint64_t scan = 0;
  for (const char c : rest.substr(0, 10)) {
    if (c < '0' || c > '9') throw ProtocolError("kvstore key " + shown(key) + ": the scan number is not 10 digits");
    scan = scan * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (scan > kU32) throw ProtocolError("kvstore key " + shown(key) + ": scan number above 2^32");
  return static_cast<std::uint32_t>(scan);
}

std::string scan_request_key(std::uint32_t scan) { return scan_prefix(scan) + "request"; }

std::string scan_producer_key(std::uint32_t scan, std::uint32_t receiver, std::uint32_t thread) {
  return scan_prefix(scan) + "producer/r" + std::to_string(receiver) + "t" + std::to_string(thread);
}

std::string scan_relay_key(std::uint32_t scan, std::uint32_t thread) {
  return scan_prefix(scan) + "aggregator/t" + std::to_string(thread);
}

std::string scan_nodegroup_key(std::uint32_t scan, std::string_view uid) {
  if (uid.empty() || uid.find('/') != std::string_view::npos || uid.size() > kMaxUidBytes) {
    throw ProtocolError("scan record: NodeGroup uid " + shown(uid) + " must be 1.." + std::to_string(kMaxUidBytes) +
                        " bytes without '/'");
  }
  return scan_prefix(scan) + "nodegroup/" + std::string(uid);
}

std::string scan_file_key(std::uint32_t scan) { return scan_prefix(scan) + "file"; }

// ---------------------------------------------------------------------------------------------
// ScanRequestRecord

std::string ScanRequestRecord::encode() const {
  check_size("ScanRequestRecord: routing uids", routing.size(), kMaxRoutingLength);
  check_size("ScanRequestRecord: receivers", producer_threads.size(), kMaxPorts);
  check_tier("ScanRequestRecord: tier", tier);
  // "tier" only for a tier: a record of one aggregator reads as before.
  detail::MapPacker packer(std::size(kRequestFields) - (tier.empty() ? 1 : 0), kSchemaVersion);
  packer.field("scan_number", std::uint64_t{scan_number});
  packer.field("scan_x", std::uint64_t{scan_x});
  packer.field("scan_y", std::uint64_t{scan_y});
  packer.field("source", source);
  packer.field("routing", routing);
  packer.field("producer_threads", std::vector<std::uint64_t>(producer_threads.begin(), producer_threads.end()));
  packer.field("requested_s", requested_s);
  if (!tier.empty()) packer.field("tier", std::vector<std::uint64_t>(tier.begin(), tier.end()));
  return packer.bytes();
}

ScanRequestRecord ScanRequestRecord::decode(std::string_view bytes) {
  const detail::MsgpackMap map = record_map(bytes, "ScanRequestRecord", kRequestFields);
  ScanRequestRecord record;
  record.scan_number = u32(map, "scan_number");
  record.scan_x = static_cast<std::uint32_t>(map.unsigned_int("scan_x", kMaxScanSide));
  record.scan_y = static_cast<std::uint32_t>(map.unsigned_int("scan_y", kMaxScanSide));
  record.source = map.string("source", kMaxNameBytes);
  record.routing = map.strings("routing", kMaxRoutingLength, kMaxUidBytes);
  check_uids(map, "routing", record.routing);
  for (const std::uint64_t threads : map.unsigned_ints("producer_threads", kMaxPorts, kU32)) {
    record.producer_threads.push_back(static_cast<std::uint32_t>(threads));
  }
  record.requested_s = seconds(map, "requested_s");
  if (map.has("tier")) {
    for (const std::uint64_t member : map.unsigned_ints("tier", kMaxTier, kMaxTier - 1)) {
      record.tier.push_back(static_cast<std::uint32_t>(member));
    }
    try {
      check_tier("tier", record.tier);
    } catch (const ProtocolError& error) {
      map.fail(map.about("tier") + ": " + error.what());
    }
  }
  return record;
}

bool ScanRequestRecord::operator==(const ScanRequestRecord& o) const {
  return scan_number == o.scan_number && scan_x == o.scan_x && scan_y == o.scan_y && source == o.source &&
         routing == o.routing && producer_threads == o.producer_threads && requested_s == o.requested_s &&
         tier == o.tier;
}

bool ScanRequestRecord::carried_by(std::uint32_t member) const {
  return tier.empty() ? member == 0 : std::find(tier.begin(), tier.end(), member) != tier.end();
}

// ---------------------------------------------------------------------------------------------
// ProducerScanRecord

std::uint64_t ProducerScanRecord::unaccounted() const {
  const std::uint64_t accounted = lost_upstream + sent + spilled;
  return accounted >= owned ? 0 : owned - accounted;
}

std::optional<std::map<std::string, std::uint64_t>> ProducerScanRecord::counts_for(std::uint32_t member) const {
  if (tier_counts.empty()) {
    if (member != 0) return std::nullopt;
    return counts;
  }
  const std::size_t width = routing.size();
  if (width == 0 || (std::size_t{member} + 1) * width > tier_counts.size()) return std::nullopt;
  std::map<std::string, std::uint64_t> part;
  for (std::size_t g = 0; g < width; ++g) part[routing[g]] = tier_counts[member * width + g];
  return part;
}

std::uint64_t ProducerScanRecord::sent_to(std::uint32_t member) const {
  if (tier_sent.empty()) return member == 0 ? sent : 0;
  return member < tier_sent.size() ? tier_sent[member] : 0;
}

std::string ProducerScanRecord::encode() const {
  if (!parse_service_state(state)) throw ProtocolError("ProducerScanRecord: state " + shown(state) + " is not a service state");
  check_size("ProducerScanRecord: routing uids", routing.size(), kMaxRoutingLength);
  check_size("ProducerScanRecord: counts", counts.size(), kMaxRoutingLength);
  check_size("ProducerScanRecord: spill_file bytes", spill_file.size(), kMaxTextBytes);
  check_size("ProducerScanRecord: tier_counts", tier_counts.size(), kMaxRoutingLength);
  if (!tier_counts.empty() && (routing.empty() || tier_counts.size() % routing.size() != 0)) {
    throw ProtocolError("ProducerScanRecord: " + std::to_string(tier_counts.size()) +
                        " tier_counts, not a multiple of the " + std::to_string(routing.size()) + " routing entries");
  }
  check_size("ProducerScanRecord: tier_sent", tier_sent.size(), kMaxTier);
  // "tier_counts" and "tier_sent" only for a tier: a record of one aggregator reads as before.
  detail::MapPacker packer(std::size(kProducerFields) - (tier_counts.empty() ? 1 : 0) - (tier_sent.empty() ? 1 : 0),
                           kSchemaVersion);
  packer.field("receiver", std::uint64_t{receiver});
  packer.field("thread", std::uint64_t{thread});
  packer.field("state", state);
  packer.field("routing", routing);
  packer.field("counts", counts);
  packer.field("owned", owned);
  packer.field("lost_upstream", lost_upstream);
  packer.field("sent", sent);
  packer.field("spilled", spilled);
  packer.field("spill_file", spill_file);
  packer.field("partial", partial);
  packer.field("error", cut_text(error, kMaxTextBytes));
  packer.field("updated_s", updated_s);
  if (!tier_counts.empty()) packer.field("tier_counts", tier_counts);
  if (!tier_sent.empty()) packer.field("tier_sent", tier_sent);
  return packer.bytes();
}

ProducerScanRecord ProducerScanRecord::decode(std::string_view bytes) {
  const detail::MsgpackMap map = record_map(bytes, "ProducerScanRecord", kProducerFields);
  ProducerScanRecord record;
  record.receiver = u32(map, "receiver");
  record.thread = u32(map, "thread");
  record.state = map.string("state", kMaxNameBytes);
  if (!parse_service_state(record.state)) map.fail(map.about("state") + ": " + shown(record.state) + " is not a service state");
  record.routing = map.strings("routing", kMaxRoutingLength, kMaxUidBytes);
  check_uids(map, "routing", record.routing);
  record.counts = map.counts("counts", kMaxRoutingLength, kMaxUidBytes, kU64);
  record.owned = map.unsigned_int("owned", kU64);
  record.lost_upstream = map.unsigned_int("lost_upstream", kU64);
  record.sent = map.unsigned_int("sent", kU64);
  record.spilled = map.unsigned_int("spilled", kU64);
  record.spill_file = map.string("spill_file", kMaxTextBytes);
  record.partial = map.boolean("partial");
  record.error = map.string("error", kMaxTextBytes);
  record.updated_s = seconds(map, "updated_s");
  if (map.has("tier_counts")) {
    record.tier_counts = map.unsigned_ints("tier_counts", kMaxRoutingLength, kU64);
    if (record.routing.empty() || record.tier_counts.size() % record.routing.size() != 0) {
      map.fail(map.about("tier_counts") + ": " + std::to_string(record.tier_counts.size()) +
               " entries, not a multiple of the " + std::to_string(record.routing.size()) + " routing entries");
    }
  }
  if (map.has("tier_sent")) record.tier_sent = map.unsigned_ints("tier_sent", kMaxTier, kU64);
  return record;
}

bool ProducerScanRecord::operator==(const ProducerScanRecord& o) const {
  return receiver == o.receiver && thread == o.thread && state == o.state && routing == o.routing &&
         counts == o.counts && owned == o.owned && lost_upstream == o.lost_upstream && sent == o.sent &&
         spilled == o.spilled && spill_file == o.spill_file && partial == o.partial && error == o.error &&
         updated_s == o.updated_s && tier_counts == o.tier_counts && tier_sent == o.tier_sent;
}

// ---------------------------------------------------------------------------------------------
// RelayScanRecord

std::string RelayScanRecord::encode() const {
  check_size("RelayScanRecord: forwarded", forwarded.size(), kMaxRoutingLength);
  check_size("RelayScanRecord: lost", lost.size(), kMaxRoutingLength);
  check_size("RelayScanRecord: dead", dead.size(), kMaxRoutingLength);
  // "run" only when there is one: a record without it reads as before.
  detail::MapPacker packer(std::size(kRelayFields) - (run == 0 ? 1 : 0), kSchemaVersion);
  packer.field("thread", std::uint64_t{thread});
  packer.field("complete", complete);
  packer.field("forwarded", forwarded);
  packer.field("lost", lost);
  packer.field("dead", dead);
  packer.field("updated_s", updated_s);
  if (run != 0) packer.field("run", std::uint64_t{run});
  return packer.bytes();
}

RelayScanRecord RelayScanRecord::decode(std::string_view bytes) {
  const detail::MsgpackMap map = record_map(bytes, "RelayScanRecord", kRelayFields);
  RelayScanRecord record;
  record.thread = u32(map, "thread");
  record.complete = map.boolean("complete");
  record.forwarded = map.counts("forwarded", kMaxRoutingLength, kMaxUidBytes, kU64);
  record.lost = map.counts("lost", kMaxRoutingLength, kMaxUidBytes, kU64);
  record.dead = map.strings("dead", kMaxRoutingLength, kMaxUidBytes);
  check_uids(map, "dead", record.dead);
  record.updated_s = seconds(map, "updated_s");
  if (map.has("run")) record.run = u32(map, "run");
  return record;
}

bool RelayScanRecord::operator==(const RelayScanRecord& o) const {
  return thread == o.thread && complete == o.complete && forwarded == o.forwarded && lost == o.lost &&
         dead == o.dead && updated_s == o.updated_s && run == o.run;
}

// ---------------------------------------------------------------------------------------------
// NodeGroupScanRecord

std::string NodeGroupScanRecord::encode() const {
  if (uid.empty() || uid.find('/') != std::string::npos || uid.size() > kMaxUidBytes) {
    throw ProtocolError("NodeGroupScanRecord: uid " + shown(uid) + " must be 1.." + std::to_string(kMaxUidBytes) +
                        " bytes without '/'");
  }
  check_size("NodeGroupScanRecord: ports expected", expected.size(), kMaxPorts);
  check_size("NodeGroupScanRecord: ports received", received.size(), kMaxPorts);
  check_size("NodeGroupScanRecord: runs", runs.size(), kMaxPorts * kMaxRunsPerPort);
  // "runs" only when a port heard more than one: a record without it reads as before.
  detail::MapPacker packer(std::size(kNodeGroupFields) - (runs.empty() ? 1 : 0), kSchemaVersion);
  packer.field("uid", uid);
  packer.field("expected", expected);
  packer.field("received", received);
  packer.field("frames_complete", frames_complete);
  packer.field("frames_incomplete", frames_incomplete);
  packer.field("sectors_counted", sectors_counted);
  packer.field("late", late);
  packer.field("duplicates", duplicates);
  packer.field("timed_out", timed_out);
  packer.field("updated_s", updated_s);
  if (!runs.empty()) {
    std::vector<std::vector<std::int64_t>> rows;
    for (const PortRun& run : runs) {
      rows.push_back({std::int64_t{run.port}, std::int64_t{run.run}, run.expected,
                      static_cast<std::int64_t>(std::min<std::uint64_t>(run.received, kI64))});
    }
    packer.field("runs", rows);
  }
  return packer.bytes();
}

NodeGroupScanRecord NodeGroupScanRecord::decode(std::string_view bytes) {
  detail::MsgpackMap map = record_map(bytes, "NodeGroupScanRecord", kNodeGroupFields);
  NodeGroupScanRecord record;
  record.uid = map.string("uid", kMaxUidBytes);
  map.name(record.uid);
  check_uids(map, "uid", {record.uid});
  record.expected = map.counts_or_unknown("expected", kMaxPorts);
  record.received = map.unsigned_ints("received", kMaxPorts, kU64);
  record.frames_complete = map.unsigned_int("frames_complete", kU64);
  record.frames_incomplete = map.unsigned_int("frames_incomplete", kU64);
  record.sectors_counted = map.unsigned_int("sectors_counted", kU64);
  record.late = map.unsigned_int("late", kU64);
  record.duplicates = map.unsigned_int("duplicates", kU64);
  record.timed_out = map.boolean("timed_out");
  record.updated_s = seconds(map, "updated_s");
  if (map.has("runs")) {
    const auto rows = map.count_rows("runs", kMaxPorts * kMaxRunsPerPort, kPortRunWidth);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::vector<std::int64_t>& row = rows[i];
      const std::string which = map.about("runs") + ": run " + std::to_string(i);
      // Only the expected count may be unknown (-1); the port must be one the record counts.
      if (row[0] < 0 || static_cast<std::uint64_t>(row[0]) >= record.expected.size()) {
        map.fail(which + ": port " + std::to_string(row[0]) + " is not one of the record's " +
                 std::to_string(record.expected.size()) + " ports");
      }
      if (row[1] < 0 || static_cast<std::uint64_t>(row[1]) > kU32) map.fail(which + ": run is not a uint32");
      if (row[3] < 0) map.fail(which + ": received is not a count");
      record.runs.push_back(PortRun{static_cast<std::uint32_t>(row[0]), static_cast<std::uint32_t>(row[1]), row[2],
                                    static_cast<std::uint64_t>(row[3])});
    }
  }
  return record;
}

bool NodeGroupScanRecord::operator==(const NodeGroupScanRecord& o) const {
  return uid == o.uid && expected == o.expected && received == o.received && frames_complete == o.frames_complete &&
         frames_incomplete == o.frames_incomplete && sectors_counted == o.sectors_counted && late == o.late &&
         duplicates == o.duplicates && timed_out == o.timed_out && updated_s == o.updated_s && runs == o.runs;
}

// ---------------------------------------------------------------------------------------------
// ScanFileRecord

std::uint64_t ScanFileRecord::total_counted() const {
  return std::accumulate(sectors_counted.begin(), sectors_counted.end(), std::uint64_t{0});
}

std::string ScanFileRecord::encode() const {
  if (outcome != kOutcomeComplete && outcome != kOutcomeIncomplete && outcome != kOutcomeFailed) {
    throw ProtocolError("ScanFileRecord: outcome " + shown(outcome) + " is not complete, incomplete or failed");
  }
  check_size("ScanFileRecord: path bytes", path.size(), kMaxTextBytes);
  check_size("ScanFileRecord: extra paths", extra_paths.size(), kMaxExtraPaths);
  check_size("ScanFileRecord: receivers", sectors_counted.size(), kMaxPorts);
  detail::MapPacker packer(std::size(kFileFields), kSchemaVersion);
  packer.field("outcome", outcome);
  packer.field("path", path);
  packer.field("extra_paths", extra_paths);
  packer.field("positions", positions);
  packer.field("frames_written", frames_written);
  packer.field("positions_missing", positions_missing);
  packer.field("sectors_counted", sectors_counted);
  packer.field("reason", cut_text(reason, kMaxTextBytes));
  packer.field("written_s", written_s);
  return packer.bytes();
}

ScanFileRecord ScanFileRecord::decode(std::string_view bytes) {
  const detail::MsgpackMap map = record_map(bytes, "ScanFileRecord", kFileFields);
  ScanFileRecord record;
  record.outcome = map.string("outcome", kMaxNameBytes);
  if (record.outcome != kOutcomeComplete && record.outcome != kOutcomeIncomplete && record.outcome != kOutcomeFailed) {
    map.fail(map.about("outcome") + ": " + shown(record.outcome) + " is not complete, incomplete or failed");
  }
  record.path = map.string("path", kMaxTextBytes);
  record.extra_paths = map.strings("extra_paths", kMaxExtraPaths, kMaxTextBytes);
  record.positions = map.unsigned_int("positions", kU64);
  record.frames_written = map.unsigned_int("frames_written", kU64);
  record.positions_missing = map.unsigned_int("positions_missing", kU64);
  record.sectors_counted = map.unsigned_ints("sectors_counted", kMaxPorts, kU64);
  record.reason = map.string("reason", kMaxTextBytes);
  record.written_s = seconds(map, "written_s");
  return record;
}

bool ScanFileRecord::operator==(const ScanFileRecord& o) const {
  return outcome == o.outcome && path == o.path && extra_paths == o.extra_paths && positions == o.positions &&
         frames_written == o.frames_written && positions_missing == o.positions_missing &&
         sectors_counted == o.sectors_counted && reason == o.reason && written_s == o.written_s;
}

}  // namespace sectorflow::protocol
