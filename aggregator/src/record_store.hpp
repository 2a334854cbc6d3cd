// The relay threads' view of the scan records (kvstore/SPEC.md, "scans/<n:010d>/..."): a kvstore
// replica of scans/, from which a restarted relay rebuilds a scan it has no state for (the
// producer threads write their routing and counts before their info message), and through which
// each relay thread writes its own record, scans/<n>/aggregator/t<r>, without an owner so that it
// outlives this process.
//
// Threads: every method may be called from any relay thread (the kvstore client is thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/protocol/bad_entries.hpp"
#include "sectorflow/protocol/scan_records.hpp"

namespace sectorflow::aggregator::detail {

class RecordStore {
 public:
  /// Starts a replica of scans/ with `options` (its subtree is forced); records are written with
  /// `ttl_s` ([kvstore] scan_record_ttl_s).
  RecordStore(kvstore::ClientOptions options, double ttl_s);
  ~RecordStore();
  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;

  /// The scan records of receiver `receiver`'s producer threads for `scan` that carry a routing
  /// list (the threads that stream it), in thread order. Waits at most `sync_wait` for the replica's
  /// first sync (a restarted relay asks before its replica is complete); a record that does not
  /// decode is skipped and reported once through the replica's log function.
  std::vector<protocol::ProducerScanRecord> producer_records(std::uint32_t scan, std::uint32_t receiver,
                                                             std::chrono::milliseconds sync_wait) const;
  /// What receiver `receiver`'s `threads` producer threads sent of `scan` through tier member
  /// `member` (all of it with one aggregator), once the scan is
  /// aborted (scans/<n>/abort is in the replica) and every thread wrote its last record (finished
  /// or error: it sends no more); nullopt before. A record that does not decode counts as missing.
  std::optional<std::uint64_t> aborted_sent(std::uint32_t scan, std::uint32_t receiver, std::uint32_t threads,
                                            std::uint32_t member = 0) const;
  /// This relay thread's record of `scan` as the replica holds it (a previous process may have
  /// declared NodeGroups dead), or nullopt.
  std::optional<protocol::RelayScanRecord> relay_record(std::uint32_t scan, std::uint32_t thread) const;
  /// The scan's request record (scans/<n>/request) as the replica holds it, or nullopt (none, or
  /// one that does not decode, reported once).
  std::optional<protocol::ScanRequestRecord> request_record(std::uint32_t scan) const;
  /// Writes scans/<scan>/request once, without an owner: the routing a native scan was given.
  void write(const protocol::ScanRequestRecord& record);
  /// Writes scans/<scan>/aggregator/t<record.thread> once, without an owner. Never waits for the
  /// network. Throws kvstore::KvstoreError if the client refuses it (closed, value too large).
  void write(std::uint32_t scan, const protocol::RelayScanRecord& record);
  /// Waits until the replica is complete and live or the timeout passes; returns whether it is.
  bool wait_synced(std::chrono::milliseconds timeout) const { return client_.wait_synced(timeout); }
  /// Sends what is still queued (bounded by one silence period) and stops the replica.
  void close();

 private:
  /// The keys of `scan` that begin with `prefix` (a whole key or its start), read through the scan's
  /// summary once it is folded: key -> value.
  std::map<std::string, std::string> parts(std::uint32_t scan, const std::string& prefix) const;

  kvstore::Client client_;
  mutable protocol::BadEntries bad_;  // reporting what was read does not change what is known
  double ttl_s_;
};

}  // namespace sectorflow::aggregator::detail
