// What the counting threads hand to the live view while a scan runs: each counted frame's
// kernel columns (VirtualImager::columns) and electron events, collected under a lock and taken in batches by the
// publisher (sectorflow.live.publisher) a few times a second. Bounded: a batch holds at most
// max_frames frames and max_events events; a frame beyond is dropped from the live view (never
// from the scan's file) and counted, so a publisher that stops taking never grows memory or slows
// counting by more than the lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "sectorflow/consumer/nodegroup/virtual_images.hpp"

namespace sectorflow::consumer::nodegroup {

/// Frames counted since the last take, in the order they were counted.
struct LiveBatch {
  std::vector<std::uint32_t> scan;
  std::vector<std::uint32_t> scan_x;
  std::vector<std::uint32_t> scan_y;
  std::vector<std::uint64_t> position;
  std::vector<std::string> names;           ///< the kernels' columns (VirtualImager::columns)
  std::vector<std::vector<float>> columns;  ///< columns[k]: per frame, its value of column k
  std::vector<std::uint64_t> offsets{0};  ///< frame i's events are events[offsets[i] .. offsets[i + 1])
  std::vector<std::uint32_t> events;
  std::uint64_t dropped = 0;  ///< frames left out of this batch because it was full

  std::size_t frames() const { return position.size(); }
};

class LiveFeed {
 public:
  /// `names`: the kernels' columns, whose values each frame brings (VirtualImager::image).
  LiveFeed(std::size_t max_frames, std::size_t max_events, std::vector<std::string> names);

  /// Adds a counted frame (thread-safe); drops and counts it if the batch is full.
  void record(std::uint32_t scan, std::uint32_t scan_x, std::uint32_t scan_y, std::uint64_t position,
              const std::vector<float>& values, const std::vector<std::uint32_t>& events);

  /// The frames recorded since the last take (thread-safe); the feed starts a new batch.
  LiveBatch take();

  /// Frames dropped since the feed was made.
  std::uint64_t dropped() const { return dropped_total_.load(std::memory_order_relaxed); }

 private:
  LiveBatch empty_batch() const;

  std::size_t max_frames_;
  std::vector<std::string> names_;
  std::size_t max_events_;
  std::mutex mutex_;
  LiveBatch batch_;
  std::atomic<std::uint64_t> dropped_total_{0};
};

}  // namespace sectorflow::consumer::nodegroup
