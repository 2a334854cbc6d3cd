#include "sectorflow/consumer/nodegroup/live_feed.hpp"

#include <utility>

namespace sectorflow::consumer::nodegroup {

LiveFeed::LiveFeed(std::size_t max_frames, std::size_t max_events, std::vector<std::string> names)
    : max_frames_(max_frames), names_(std::move(names)), max_events_(max_events), batch_(empty_batch()) {}

LiveBatch LiveFeed::empty_batch() const {
  LiveBatch batch;
  batch.names = names_;
  batch.columns.resize(names_.size());
  return batch;
}

void LiveFeed::record(std::uint32_t scan, std::uint32_t scan_x, std::uint32_t scan_y, std::uint64_t position,
                      const std::vector<float>& values, const std::vector<std::uint32_t>& events) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (batch_.frames() >= max_frames_ || batch_.events.size() + events.size() > max_events_) {
    ++batch_.dropped;
    dropped_total_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  batch_.scan.push_back(scan);
  batch_.scan_x.push_back(scan_x);
  batch_.scan_y.push_back(scan_y);
  batch_.position.push_back(position);
  for (std::size_t k = 0; k < batch_.columns.size(); ++k) batch_.columns[k].push_back(values[k]);
  batch_.events.insert(batch_.events.end(), events.begin(), events.end());
  batch_.offsets.push_back(batch_.events.size());
}

LiveBatch LiveFeed::take() {
  LiveBatch taken = empty_batch();  // made outside the lock: counting threads wait on it
  std::lock_guard<std::mutex> lock(mutex_);
  std::swap(taken, batch_);
  return taken;
}

}  // namespace sectorflow::consumer::nodegroup
