// The state schema: which keys sectorflow's services keep in the kvstore and what their values
// hold. Defined once here; Python uses the same constants and codecs through sectorflow.kvstore.
//
// Every value is one msgpack map carrying "version" (kSchemaVersion) and the fields below.
// Decoders check the version, every required field and its type, and throw ProtocolError naming
// the record, the field, what was expected and what came.
//
//   nodegroups/<uid>          NodeGroupRecord: a NodeGroup that can receive a scan. Set by the
//                             NodeGroup with a ttl it refreshes while it lives.
//       uid     str           unique id, also the key suffix; producers route frame f of a scan to
//                             the (f mod n)-th of the sorted UIDs
//       host    str           address its PULL sockets are bound to
//       ports   [u16, ...]    one data port per aggregator thread: thread r pushes to ports[r]
//       node    str           compute node (host name) it runs on
//       rank    u32           MPI rank of the process that owns it
//       status  str           the NodeGroup's service state (service_state.hpp)
//       stack_id str          optional: the stack id (kStackIdChars lowercase hex digits) of the
//                             kvstore its writer's client last synced with: the stack it registered
//                             in. Absent: written before the client synced, or before the field
//                             existed. encode() writes it only when set, so old readers see old records.
//
//   status/<service>/<name>   ServiceStatus: what one service instance is doing, e.g.
//                             status/producer/r0t1 (receiver 0, thread 1), status/aggregator/t0,
//                             status/nodegroup/<uid>, status/kvstore/server. Set with a ttl.
//       state      str        one of the service states (service_state.hpp): starting, idle,
//                             streaming, writing-to-disk, counting, writing, finished, error,
//                             stopping, stopped
//       scan       u32        current or last scan number (0 before the first scan)
//       messages   u64        messages handled so far (sent, forwarded or received)
//       bytes      u64        bytes handled so far
//       updated_s  float      wall-clock time of this status, seconds since the Unix epoch
//       <other>    bool | int | float | str   free extra fields (e.g. malformed, expected)
//
//   acquire/request           AcquireRequest: the scan the operator asks the producers to run.
//       scan_number u32, scan_x u32, scan_y u32 (scan shape), rate_hz float (0: as fast as possible)
//       routing  [str, ...]  optional: the sorted NodeGroup UIDs the scan is routed over, fixed by
//                            `sectorflow acquire` from its replica so that every producer thread
//                            uses the same list; [] means fallback (write the scan to raw files).
//                            Absent (records written before the field existed): each producer
//                            thread reads nodegroups/ from its own replica at scan start.
//       source   str         optional: "simulator" (generate the scan) or "replay" (stream the raw
//                            files of this scan from producer.fallback_dir). Absent = "simulator".
//                            encode() writes it only for "replay", so old readers see old records.
//
// Key parts (uid, service, name) are non-empty and hold no '/'.
//
// Bounds (the kMax* constants below): every decoder refuses a record beyond them, so that a value a
// peer wrote costs a reader a bounded amount of memory and time, and every encoder refuses to write
// one (it would be unreadable), except that a status's text field is shortened to fit: a status is
// for people, and an error message too long for it must not turn into a second error.
//
// Readers of a list (nodegroups_from, and the Python Client's nodegroups() and statuses()) skip an
// entry that does not decode and return it with its reason, so that one bad value written by
// anyone cannot take the list away from everybody; BadEntries reports each such entry once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "sectorflow/protocol/limits.hpp"
#include "sectorflow/protocol/service_state.hpp"

namespace sectorflow::protocol {

inline constexpr std::uint32_t kSchemaVersion = 1;

/// Bytes of a short string field: a host (a DNS name has at most 253), node, state, source, the
/// name of a status's extra field.
inline constexpr std::size_t kMaxNameBytes = 255;
/// Bytes of a status's text extra field (e.g. an error message).
inline constexpr std::size_t kMaxTextBytes = 4096;
/// Ports of a NodeGroup: one per aggregator thread, i.e. per detector sector.
inline constexpr std::size_t kMaxPorts = 256;
/// Extra fields of a status.
inline constexpr std::size_t kMaxExtraFields = 64;

inline constexpr std::string_view kNodegroupsPrefix = "nodegroups/";
inline constexpr std::string_view kStatusPrefix = "status/";
inline constexpr std::string_view kAcquirePrefix = "acquire/";
inline constexpr std::string_view kAcquireRequestKey = "acquire/request";

inline constexpr std::string_view kServiceProducer = "producer";
inline constexpr std::string_view kServiceAggregator = "aggregator";
inline constexpr std::string_view kServiceNodegroup = "nodegroup";
inline constexpr std::string_view kServiceKvstore = "kvstore";


/// "nodegroups/<uid>"; throws ProtocolError if uid is empty or holds '/'.
std::string nodegroup_key(std::string_view uid);
/// "status/<service>/<name>"; throws ProtocolError if a part is empty or holds '/'.
std::string status_key(std::string_view service, std::string_view name);
/// "status/<service>/", or "status/" for an empty service: the subtree of a service's statuses.
std::string status_prefix(std::string_view service = {});
/// (service, name) of a status key; throws ProtocolError for any other key.
std::pair<std::string, std::string> parse_status_key(std::string_view key);
/// The uid of a nodegroups/ key; throws ProtocolError for any other key.
std::string parse_nodegroup_key(std::string_view key);

/// Hex digits of a stack id (64 random bits; kvstore/SPEC.md, "The stack's identity").
inline constexpr std::size_t kStackIdChars = 16;
/// Whether `text` is a stack id (kStackIdChars lowercase hex digits).
bool is_stack_id(std::string_view text);

struct NodeGroupRecord {
  std::string uid;
  std::string host;
  std::vector<std::uint16_t> ports;  ///< ports[r] receives from aggregator thread r
  std::string node;
  std::uint32_t rank = 0;
  std::string status = std::string(to_string(ServiceState::kIdle));  ///< a service state
  std::string stack_id;  ///< the stack it registered in (is_stack_id), or "" if its client had not synced

  /// "tcp://<host>:<ports[thread]>"; throws ProtocolError if the thread has no port.
  std::string endpoint(std::size_t thread) const;
  /// Throws ProtocolError for a uid that is empty, holds '/' or is longer than kMaxUidBytes, more
  /// than kMaxPorts ports, a host, node or status longer than kMaxNameBytes, or a stack_id that is
  /// neither "" nor a stack id.
  std::string encode() const;
  /// Throws ProtocolError naming the uid and the field if the bytes are not a valid record (the
  /// bounds of encode(), a non-empty host and at least one port).
  static NodeGroupRecord decode(std::string_view bytes);
  bool operator==(const NodeGroupRecord& other) const;
};

/// What a reader made of a nodegroups/ subtree: the usable records and the entries it skipped.
struct NodeGroupList {
  std::vector<NodeGroupRecord> records;         ///< sorted by uid: the routing order
  std::map<std::string, std::string> rejected;  ///< key -> why it was skipped (names the field)
};

/// The NodeGroups of a nodegroups/ subtree (key -> value). An entry whose key is not
/// nodegroups/<uid>, whose value does not decode or holds another uid is skipped and listed in
/// `rejected` with the reason; it never hides the others. Does not throw for bad entries.
NodeGroupList nodegroups_from(const std::map<std::string, std::string>& entries);

/// A free extra field of a status.
using StatusValue = std::variant<bool, std::int64_t, double, std::string>;

struct ServiceStatus {
  std::string state;
  std::uint32_t scan = 0;
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
  double updated_s = 0.0;  ///< seconds since the Unix epoch; encode() stamps now if 0
  std::map<std::string, StatusValue> extra;

  /// Throws ProtocolError if the state is empty or longer than kMaxNameBytes, an extra field reuses
  /// a standard name, or there are more than kMaxExtraFields extra fields or a name longer than
  /// kMaxNameBytes. A text extra field longer than kMaxTextBytes is cut to that length.
  std::string encode() const;
  /// Unknown fields become extra; throws ProtocolError for a missing or mistyped standard field, an
  /// empty state (which encode() refuses too), an extra field that is not a bool, integer, float
  /// or string, or a bound above passed.
  static ServiceStatus decode(std::string_view bytes);
  bool operator==(const ServiceStatus& other) const;
};

inline constexpr std::string_view kSourceSimulator = "simulator";
inline constexpr std::string_view kSourceReplay = "replay";

struct AcquireRequest {
  std::uint32_t scan_number = 0;
  std::uint32_t scan_x = 0;
  std::uint32_t scan_y = 0;
  double rate_hz = 0.0;  ///< frames per second; 0 means as fast as possible
  /// Sorted NodeGroup UIDs, no duplicates; empty = fallback; nullopt = each producer's replica.
  std::optional<std::vector<std::string>> routing;
  std::string source = std::string(kSourceSimulator);  ///< kSourceSimulator or kSourceReplay
  /// The members of the aggregation tier that carry the scan, ascending (protocol/SPEC.md, "The
  /// aggregation tier"): frame f goes through member tier[f % size]. Empty: every member of the
  /// configuration's tier (one aggregator: member 0).
  std::vector<std::uint32_t> tier;

  /// Throws ProtocolError for a scan side outside 1..kMaxScanSide, a negative rate, an unknown
  /// source, or a routing list longer than kMaxRoutingUids, not sorted, with duplicates or with a
  /// uid that is empty, holds '/' or is longer than kMaxUidBytes.
  std::string encode() const;
  static AcquireRequest decode(std::string_view bytes);
  bool operator==(const AcquireRequest& other) const;
};

/// Throws ProtocolError ("<what>: ...") unless `tier` lists at most kMaxTier members, ascending,
/// without duplicates, each below kMaxTier.
void check_tier(const std::string& what, const std::vector<std::uint32_t>& tier);

/// Seconds since the Unix epoch: the clock of ServiceStatus::updated_s.
double wall_clock_s();

}  // namespace sectorflow::protocol
