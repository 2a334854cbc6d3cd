#include "native_routes.hpp"

#include <utility>

#include "sectorflow/protocol/records.hpp"
#include "sectorflow/protocol/scan_records.hpp"

namespace sectorflow::aggregator::detail {

NativeRoutes::NativeRoutes(const Directory& directory, RecordStore& records, std::vector<std::uint32_t> producer_threads,
                           std::chrono::milliseconds hold)
    : directory_(directory), records_(records), producer_threads_(std::move(producer_threads)), hold_(hold) {}

std::vector<std::string> NativeRoutes::open(std::uint32_t scan, std::uint32_t scan_x, std::uint32_t scan_y,
                                            std::uint32_t thread) {
  const auto now = std::chrono::steady_clock::now();
  const std::lock_guard<std::mutex> lock(mutex_);
  prune(now);
  auto found = routes_.find(scan);
  if (found == routes_.end()) {
    // Fixed under the lock: a second thread opening the scan meanwhile waits for this list.
    found = routes_.emplace(scan, Route{fix(scan, scan_x, scan_y, thread), 0, now}).first;
  } else if (const std::optional<protocol::ScanRequestRecord> request = records_.request_record(scan);
             request && !request->routing.empty() && request->routing != found->second.routing) {
    // Requested again since this list was fixed (a replay into the next NodeGroup job): the run
    // opening now is the new request's; the threads still in the old run keep the list they took.
    found->second.routing = request->routing;
  }
  ++found->second.holders;
  return found->second.routing;
}

void NativeRoutes::close(std::uint32_t scan) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto found = routes_.find(scan);
  if (found == routes_.end() || found->second.holders == 0) return;
  --found->second.holders;
  found->second.released = std::chrono::steady_clock::now();
}

void NativeRoutes::prune(std::chrono::steady_clock::time_point now) {
  for (auto it = routes_.begin(); it != routes_.end();) {
    if (it->second.holders == 0 && now - it->second.released > hold_) {
      it = routes_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<std::string> NativeRoutes::fix(std::uint32_t scan, std::uint32_t scan_x, std::uint32_t scan_y,
                                           std::uint32_t thread) {
  // A request with a routing list stands: an operator's acquire, a replay's, or this aggregator's
  // own record of the scan from before a restart. An empty one (the scan went to raw files) does
  // not: the stream that arrives now is the scan's data, and it can only go to a NodeGroup.
  if (const std::optional<protocol::ScanRequestRecord> request = records_.request_record(scan)) {
    if (!request->routing.empty()) return request->routing;
  }
  protocol::ScanRequestRecord record;
  record.scan_number = scan;
  record.scan_x = scan_x;
  record.scan_y = scan_y;
  record.source = std::string(protocol::kSourceNative);
  record.routing = directory_.registered(thread);
  record.producer_threads = producer_threads_;
  record.requested_s = protocol::wall_clock_s();
  try {
    records_.write(record);
  } catch (const std::exception&) {
    // The scan still streams; only its account lacks the request (the relay records remain).
  }
  return record.routing;
}

}  // namespace sectorflow::aggregator::detail
