// The routing lists of native scans, shared by the relay threads of one aggregator (SPEC.md, "Two
// dialects"). A native stream carries no request, so the aggregator fixes each scan's routing list
// itself when the scan's first message reaches any relay thread, and every thread routes the scan
// with that one list: all sectors of a frame must reach the same NodeGroup through R threads whose
// first messages arrive at different moments, while NodeGroups join and leave.
//
// The list is the one `sectorflow acquire` asked for (scans/<n>/request with a routing list) or,
// without one, the NodeGroups registered in the kvstore. The aggregator then writes the request
// record itself (source "native"), so that a restarted aggregator routes the rest of the scan
// alike and the scan's account knows what was streamed. A list is held while any thread has the
// scan open and for `hold` (native_scan_idle_s) after the last one closed it; the same scan number
// later is a new run (a replay) and gets a list fixed anew.
//
// Threads: every method may be called from any relay thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "directory.hpp"
#include "record_store.hpp"

namespace sectorflow::aggregator::detail {

class NativeRoutes {
 public:
  /// `producer_threads`: T_r of every receiver, written into the request records.
  NativeRoutes(const Directory& directory, RecordStore& records, std::vector<std::uint32_t> producer_threads,
               std::chrono::milliseconds hold);

  /// The routing list of native scan `scan` (shape scan_x x scan_y) for relay thread `thread`,
  /// which opens it: the one held for it, or fixed now. Counts the thread as holding the scan.
  std::vector<std::string> open(std::uint32_t scan, std::uint32_t scan_x, std::uint32_t scan_y, std::uint32_t thread);
  /// Relay thread no longer holds `scan` (closed there).
  void close(std::uint32_t scan);

 private:
  struct Route {
    std::vector<std::string> routing;
    std::size_t holders = 0;
    std::chrono::steady_clock::time_point released;
  };
  /// The list for a scan that holds none: the request's, or the registered NodeGroups (recorded).
  std::vector<std::string> fix(std::uint32_t scan, std::uint32_t scan_x, std::uint32_t scan_y, std::uint32_t thread);
  /// Forgets the lists nobody has held for longer than `hold_`.
  void prune(std::chrono::steady_clock::time_point now);

  const Directory& directory_;
  RecordStore& records_;
  std::vector<std::uint32_t> producer_threads_;
  std::chrono::milliseconds hold_;
  std::mutex mutex_;
  std::map<std::uint32_t, Route> routes_;
};

}  // namespace sectorflow::aggregator::detail
