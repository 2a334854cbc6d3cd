// Counters of one NodeGroup since it started, kept by its threads (relaxed atomics, never a lock
// on the hot path) and read by Python for status and logs.
#pragma once

#include <atomic>
#include <cstdint>

namespace sectorflow::consumer {

/// A consistent-enough copy of the counters (each value read atomically).
struct NodeGroupCounterValues {
  std::uint64_t messages = 0;           ///< data messages received on all ports
  std::uint64_t bytes = 0;              ///< their payload bytes
  std::uint64_t info_messages = 0;
  std::uint64_t malformed = 0;          ///< messages that did not decode, dropped
  std::uint64_t late_messages = 0;      ///< data of a scan already finished, dropped
  std::uint64_t duplicate_sectors = 0;
  std::uint64_t frames_complete = 0;    ///< frames counted with every sector
  std::uint64_t frames_incomplete = 0;  ///< frames counted with sectors missing
  std::uint64_t evicted_frames = 0;     ///< of those, counted early because the pool was full
  std::uint64_t uncounted_frames = 0;   ///< frames dropped because no thresholds could be computed
  std::uint64_t scans_finished = 0;
  std::uint64_t scans_timed_out = 0;
  std::uint64_t pool_slots = 0;         ///< frame slots preallocated (all counting threads)
  std::uint64_t pool_slots_in_use = 0;
  std::uint64_t pool_slots_high_water = 0;
  std::uint64_t pool_bytes = 0;         ///< bytes allocated by the assembly pool
};

struct NodeGroupCounters {
  std::atomic<std::uint64_t> messages{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> info_messages{0};
  std::atomic<std::uint64_t> malformed{0};
  std::atomic<std::uint64_t> late_messages{0};
  std::atomic<std::uint64_t> duplicate_sectors{0};
  std::atomic<std::uint64_t> frames_complete{0};
  std::atomic<std::uint64_t> frames_incomplete{0};
  std::atomic<std::uint64_t> evicted_frames{0};
  std::atomic<std::uint64_t> uncounted_frames{0};
  std::atomic<std::uint64_t> scans_finished{0};
  std::atomic<std::uint64_t> scans_timed_out{0};
  std::atomic<std::uint64_t> pool_slots{0};
  std::atomic<std::uint64_t> pool_slots_in_use{0};
  std::atomic<std::uint64_t> pool_slots_high_water{0};
  std::atomic<std::uint64_t> pool_bytes{0};

  NodeGroupCounterValues values() const {
    constexpr auto r = std::memory_order_relaxed;
    return {messages.load(r),          bytes.load(r),           info_messages.load(r),
            malformed.load(r),         late_messages.load(r),   duplicate_sectors.load(r),
            frames_complete.load(r),   frames_incomplete.load(r), evicted_frames.load(r),
            uncounted_frames.load(r),  scans_finished.load(r),  scans_timed_out.load(r),
            pool_slots.load(r),        pool_slots_in_use.load(r), pool_slots_high_water.load(r),
            pool_bytes.load(r)};
  }
};

}  // namespace sectorflow::consumer
