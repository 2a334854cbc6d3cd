// A scan's record in the kvstore (kvstore/SPEC.md, "Scan records"): what became of every sector of
// an acquired scan, written as the scan goes by every party that handles it, each under its own key:
//
//   scans/<n:010d>/request              ScanRequestRecord    `sectorflow acquire`: what was asked for
//   scans/<n:010d>/producer/r<R>t<T>    ProducerScanRecord   a producer thread: sent, spilled, not sent
//   scans/<n:010d>/aggregator/t<j>      RelayScanRecord      relay thread j of the tier (member j / R,
//                                                            receiver j % R): forwarded, lost, NodeGroups dead
//   scans/<n:010d>/nodegroup/<uid>      NodeGroupScanRecord  a NodeGroup: received, counted
//   scans/<n:010d>/file                 ScanFileRecord       MPI rank 0: the file written, or why not
//
// A sector of the scan (scan_x * scan_y positions, one sector per receiver) ends in exactly one of
// three places: counted in the scan's file, in a raw file on its receiver (spilled), or missing,
// and the parts say why it is missing. The records are written without an owner (they outlive the
// process that wrote them) with a time-to-live of [kvstore] scan_record_ttl_s; the scan number is
// zero-padded so that keys sort by scan.
//
// Each record is a msgpack map carrying "version" (kSchemaVersion) and the fields of its struct;
// the bounds of records.hpp apply (names kMaxNameBytes, texts kMaxTextBytes, uid lists
// kMaxRoutingLength, per-receiver lists kMaxPorts). Decoders throw ProtocolError naming the record
// and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sectorflow::protocol {

inline constexpr std::string_view kScansPrefix = "scans/";

/// "scans/<scan:010d>/": the subtree of one scan's record.
std::string scan_prefix(std::uint32_t scan);
/// The scan number of a key under scans/, or throws ProtocolError.
std::uint32_t parse_scan_key(std::string_view key);
std::string scan_request_key(std::uint32_t scan);
std::string scan_producer_key(std::uint32_t scan, std::uint32_t receiver, std::uint32_t thread);
std::string scan_relay_key(std::uint32_t scan, std::uint32_t thread);
std::string scan_nodegroup_key(std::uint32_t scan, std::string_view uid);
std::string scan_file_key(std::uint32_t scan);

/// The source of a scan whose request record the aggregator wrote: a native receiver's stream
/// began it (no `sectorflow acquire` asked for it; protocol/SPEC.md, "Two dialects").
inline constexpr std::string_view kSourceNative = "native";

/// What was asked for: written by `sectorflow acquire` when it publishes the request, or by the
/// aggregator for a scan a native stream began (source kSourceNative).
struct ScanRequestRecord {
  std::uint32_t scan_number = 0;
  std::uint32_t scan_x = 0;
  std::uint32_t scan_y = 0;
  std::string source;                           ///< "simulator", "replay" or "native"
  std::vector<std::string> routing;             ///< sorted NodeGroup uids; empty: written to disk
  std::vector<std::uint32_t> producer_threads;  ///< per receiver: the threads that report a part
  double requested_s = 0.0;                     ///< Unix seconds
  /// The aggregation tier's members that carry the scan, ascending (protocol/SPEC.md, "The
  /// aggregation tier"): relay thread j writes a record of it only if member j / receivers is one.
  /// Empty (not encoded): one aggregator, member 0, as before the tier.
  std::vector<std::uint32_t> tier;

  /// Whether member `member` of the tier carries the scan.
  bool carried_by(std::uint32_t member) const;

  /// The sectors of the scan: every position, one sector per receiver.
  std::uint64_t sectors() const { return std::uint64_t{scan_x} * scan_y * producer_threads.size(); }
  std::string encode() const;
  static ScanRequestRecord decode(std::string_view bytes);
  bool operator==(const ScanRequestRecord& other) const;
};

/// One producer thread's account of its sectors, written when it starts the scan (routing and
/// counts, which a restarted aggregator recovers the scan from) and when it ends it. Of the
/// `owned` sectors (the frames f with f % threads == thread, sector `receiver`): lost_upstream
/// never reached the producer, sent went to the aggregator, spilled are whole records in raw
/// files; the rest were neither (the thread stopped or failed: `error` says why).
struct ProducerScanRecord {
  std::uint32_t receiver = 0;
  std::uint32_t thread = 0;
  std::string state;                             ///< a service state: streaming, writing-to-disk, finished, error
  std::vector<std::string> routing;              ///< the scan's routing list as this thread fixed it
  std::map<std::string, std::uint64_t> counts;   ///< sectors announced per NodeGroup (over the tier)
  std::uint64_t owned = 0;
  std::uint64_t lost_upstream = 0;
  std::uint64_t sent = 0;
  std::uint64_t spilled = 0;
  std::string spill_file;                        ///< the raw file, "" if none; ends in .partial if not whole
  bool partial = false;                          ///< the raw file could not be completed
  std::string error;                             ///< why the thread failed; "" if it did not
  double updated_s = 0.0;
  /// With a tier of k > 1 aggregators: the info message's counts to member m, routing index g at
  /// [m * routing.size() + g] (k * routing.size() entries). Empty (not encoded): one aggregator,
  /// whose counts are `counts`.
  std::vector<std::uint64_t> tier_counts;
  /// With a tier of k > 1 aggregators: of `sent`, what went to each member (k entries); empty (not
  /// encoded) with one aggregator. An aborted scan closes at member m's relay once that many came.
  std::vector<std::uint64_t> tier_sent;

  /// Sectors neither lost upstream, sent nor spilled (when the thread has finished or failed).
  std::uint64_t unaccounted() const;
  /// What the thread's info message to tier member `member` announced: `counts` with no tier,
  /// else that member's part of tier_counts; nullopt when the record has no such member.
  std::optional<std::map<std::string, std::uint64_t>> counts_for(std::uint32_t member) const;
  /// What the thread sent to tier member `member`: `sent` with no tier, else tier_sent[member]
  /// (0 beyond it).
  std::uint64_t sent_to(std::uint32_t member) const;
  std::string encode() const;
  static ProducerScanRecord decode(std::string_view bytes);
  bool operator==(const ProducerScanRecord& other) const;
};

/// One relay thread's account of a scan, written when the scan closes there.
struct RelayScanRecord {
  std::uint32_t thread = 0;
  bool complete = false;                          ///< every expected message forwarded or counted lost
  std::map<std::string, std::uint64_t> forwarded; ///< per NodeGroup
  std::map<std::string, std::uint64_t> lost;      ///< per NodeGroup: dropped, it was gone or dead
  std::vector<std::string> dead;                  ///< NodeGroups declared dead for this scan
  double updated_s = 0.0;
  /// The relay thread's run of the scan (SPEC.md "Runs of a scan"); 0 (not encoded): none given.
  std::uint32_t run = 0;

  std::string encode() const;
  static RelayScanRecord decode(std::string_view bytes);
  bool operator==(const RelayScanRecord& other) const;
};

/// One run of a scan heard on one port of a NodeGroup (SPEC.md "Runs of a scan at the NodeGroups").
struct PortRun {
  std::uint32_t port = 0;
  std::uint32_t run = 0;      ///< the relay thread's run; 0: a sender that names none (version 2)
  std::int64_t expected = -1;  ///< its count, -1: no info of this run came
  std::uint64_t received = 0;
  bool operator==(const PortRun& other) const {
    return port == other.port && run == other.run && expected == other.expected && received == other.received;
  }
};

/// One NodeGroup's account of its part of a scan, written when the part is counted.
struct NodeGroupScanRecord {
  std::string uid;
  std::vector<std::int64_t> expected;   ///< per port: messages announced (-1: no count came)
  std::vector<std::uint64_t> received;  ///< per port
  std::uint64_t frames_complete = 0;
  std::uint64_t frames_incomplete = 0;
  std::uint64_t sectors_counted = 0;    ///< sectors in the frames it counted
  std::uint64_t late = 0;               ///< sectors dropped: they came after their frame was counted
  std::uint64_t duplicates = 0;
  bool timed_out = false;
  double updated_s = 0.0;
  /// Every run heard, in arrival order per port, when some port heard more than one (a stray's, a
  /// restarted relay's); empty (not encoded) when each port heard one run: `expected` and
  /// `received` say it all.
  std::vector<PortRun> runs;

  std::string encode() const;
  static NodeGroupScanRecord decode(std::string_view bytes);
  bool operator==(const NodeGroupScanRecord& other) const;
};

// A scan's outcomes, the one vocabulary of the records, the file and the account.
inline constexpr std::string_view kOutcomeComplete = "complete";      ///< every sector counted
inline constexpr std::string_view kOutcomeIncomplete = "incomplete";  ///< written, sectors missing
inline constexpr std::string_view kOutcomeFailed = "failed";          ///< no file (reason says why)
/// An operator aborted the scan (`sectorflow abort`) before every sector was counted: the outcome the
/// account gives and the counted file records; the file record itself says incomplete.
inline constexpr std::string_view kOutcomeAborted = "aborted";

/// The scan's counted file, written by MPI rank 0 of the NodeGroups' job.
struct ScanFileRecord {
  std::string outcome;                       ///< kOutcomeComplete, kOutcomeIncomplete or kOutcomeFailed
  std::string path;                          ///< the file; "" when failed
  std::vector<std::string> extra_paths;      ///< parts that came later, written beside it
  std::uint64_t positions = 0;
  std::uint64_t frames_written = 0;
  std::uint64_t positions_missing = 0;
  std::vector<std::uint64_t> sectors_counted;  ///< per receiver: its sectors in the file
  std::string reason;                        ///< why incomplete or failed; "" when complete
  double written_s = 0.0;

  std::uint64_t total_counted() const;
  std::string encode() const;
  static ScanFileRecord decode(std::string_view bytes);
  bool operator==(const ScanFileRecord& other) const;
};

}  // namespace sectorflow::protocol
