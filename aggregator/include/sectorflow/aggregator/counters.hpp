// What a relay thread counts. The thread writes atomics; anyone may read a snapshot at any time
// (the Python daemon publishes them in the kvstore). Refused messages are counted by kind
// (protocol/refusal.hpp), each with the text of its first occurrence so it can be logged once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sectorflow/protocol/refusal.hpp"

namespace sectorflow::aggregator {

/// A snapshot of one relay thread's counters.
struct RelayStats {
  std::uint32_t thread = 0;
  bool streaming = false;      ///< at least one scan is open
  std::uint32_t scan = 0;      ///< the latest scan an info message announced (0 before any)
  std::uint64_t messages = 0;  ///< data messages forwarded
  std::uint64_t bytes = 0;     ///< bytes forwarded (header and payload)
  std::uint64_t infos = 0;     ///< info messages accepted
  std::uint64_t lost = 0;      ///< data messages dropped because their NodeGroup was gone or dead
  std::uint64_t dead = 0;      ///< NodeGroups declared dead for a scan (summed over scans)
  std::uint64_t recovered_scans = 0;  ///< scans rebuilt from the producers' scan records after a restart
  std::uint64_t native_scans = 0;     ///< scans a native receiver's stream opened (no info message)
  std::uint64_t open_scans = 0;
  std::uint64_t evicted_scans = 0;  ///< scans closed unfinished to make room for a newer one
  protocol::RefusalStats malformed;  ///< messages refused, by kind (SPEC.md, "Refusals")
};

/// One scan as one relay thread saw it, reported when the scan closes there (completed, or closed
/// unfinished) and, before that, each time a NodeGroup is declared dead for it (closed = false).
struct ScanSummary {
  std::uint32_t thread = 0;
  std::uint32_t scan = 0;
  bool closed = true;           ///< false: an interim report, a NodeGroup was just declared dead
  bool complete = false;        ///< every expected message forwarded or counted lost (a dead NodeGroup's not awaited)
  bool recovered = false;       ///< rebuilt from the producers' scan records (the relay restarted mid-scan)
  std::uint64_t expected = 0;   ///< sum of the info counts
  std::uint64_t forwarded = 0;
  std::uint64_t bytes = 0;
  std::uint64_t lost = 0;
  double seconds = 0.0;         ///< from the first info to the last message
  std::map<std::string, std::uint64_t> counts;  ///< uid -> messages forwarded to it
  std::map<std::string, std::uint64_t> lost_by_uid;
  std::map<std::string, std::string> dead;  ///< uid -> why it was declared dead for this scan
  std::string note;             ///< why an interim report was made, or why the scan closed unfinished ("" otherwise)
};

/// The live counters of one relay thread.
class RelayCounters {
 public:
  explicit RelayCounters(std::uint32_t thread) : thread_(thread) {}

  void forwarded(std::size_t bytes) {
    messages_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void lost() { lost_.fetch_add(1, std::memory_order_relaxed); }
  void dead() { dead_.fetch_add(1, std::memory_order_relaxed); }
  /// A scan rebuilt from the producers' records: it becomes the latest scan, as an info would make it.
  void recovered_scan(std::uint32_t scan) {
    recovered_scans_.fetch_add(1, std::memory_order_relaxed);
    scan_.store(scan, std::memory_order_relaxed);
  }
  /// A native scan opened with its first message: it becomes the latest scan.
  void native_scan(std::uint32_t scan) {
    native_scans_.fetch_add(1, std::memory_order_relaxed);
    scan_.store(scan, std::memory_order_relaxed);
  }
  void info(std::uint32_t scan) {
    infos_.fetch_add(1, std::memory_order_relaxed);
    scan_.store(scan, std::memory_order_relaxed);
  }
  void open_scans(std::size_t n) { open_scans_.store(n, std::memory_order_relaxed); }
  void evicted_scan() { evicted_scans_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts one refused message; keeps `what` if it is the first of its kind.
  void malformed(protocol::Refusal kind, const std::string& what) { malformed_.count(kind, what); }

  RelayStats snapshot() const;

 private:
  std::uint32_t thread_;
  std::atomic<std::uint64_t> messages_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> infos_{0};
  std::atomic<std::uint64_t> lost_{0};
  std::atomic<std::uint64_t> dead_{0};
  std::atomic<std::uint64_t> recovered_scans_{0};
  std::atomic<std::uint64_t> native_scans_{0};
  std::atomic<std::uint64_t> open_scans_{0};
  std::atomic<std::uint64_t> evicted_scans_{0};
  std::atomic<std::uint32_t> scan_{0};
  protocol::RefusalCounters malformed_;
};

}  // namespace sectorflow::aggregator
