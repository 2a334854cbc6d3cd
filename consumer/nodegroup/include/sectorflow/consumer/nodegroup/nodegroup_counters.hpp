// Counters of one NodeGroup since it started, kept by its threads (relaxed atomics, never a lock
// on the hot path) and read by Python for status and logs.
#pragma once

#include <atomic>
#include <cstdint>

#include "sectorflow/protocol/refusal.hpp"

namespace sectorflow::consumer::nodegroup {

/// A consistent-enough copy of the counters (each value read atomically).
struct NodeGroupCounterValues {
  std::uint64_t messages = 0;           ///< data messages received on all ports
  std::uint64_t bytes = 0;              ///< their payload bytes
  std::uint64_t info_messages = 0;
  std::uint64_t repeated_infos = 0;     ///< infos repeating a count already taken (a restarted aggregator)
  std::uint64_t late_messages = 0;      ///< data of a scan already finished, dropped
  std::uint64_t duplicate_sectors = 0;
  std::uint64_t frames_complete = 0;    ///< frames counted with every sector
  std::uint64_t frames_incomplete = 0;  ///< frames counted with sectors missing
  std::uint64_t evicted_frames = 0;     ///< of those, counted early because the pool was full
  std::uint64_t uncounted_frames = 0;   ///< frames dropped because no thresholds could be computed
  std::uint64_t scans_finished = 0;
  std::uint64_t scans_timed_out = 0;
  std::uint64_t scans_evicted = 0;      ///< of those, closed early to make room for a newer scan
  std::uint64_t pool_slots = 0;         ///< frames that may be in assembly at once (all counting threads)
  std::uint64_t pool_slots_in_use = 0;
  std::uint64_t pool_slots_high_water = 0;
  std::uint64_t pool_bytes = 0;         ///< payload bytes the frames in assembly hold now (received sectors)
  std::uint64_t pool_bytes_high_water = 0;
  protocol::RefusalStats malformed;     ///< messages refused, by kind (SPEC.md, "Refusals")
};

struct NodeGroupCounters {
  std::atomic<std::uint64_t> messages{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> info_messages{0};
  std::atomic<std::uint64_t> repeated_infos{0};
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
  std::atomic<std::uint64_t> pool_bytes_high_water{0};
  protocol::RefusalCounters malformed;

  /// Every counter but scans_evicted, which the scan tracker keeps.
  NodeGroupCounterValues values() const {
    constexpr auto r = std::memory_order_relaxed;
    NodeGroupCounterValues v;
    v.messages = messages.load(r);
    v.bytes = bytes.load(r);
    v.info_messages = info_messages.load(r);
    v.repeated_infos = repeated_infos.load(r);
    v.late_messages = late_messages.load(r);
    v.duplicate_sectors = duplicate_sectors.load(r);
    v.frames_complete = frames_complete.load(r);
    v.frames_incomplete = frames_incomplete.load(r);
    v.evicted_frames = evicted_frames.load(r);
    v.uncounted_frames = uncounted_frames.load(r);
    v.scans_finished = scans_finished.load(r);
    v.scans_timed_out = scans_timed_out.load(r);
    v.pool_slots = pool_slots.load(r);
    v.pool_slots_in_use = pool_slots_in_use.load(r);
    v.pool_slots_high_water = pool_slots_high_water.load(r);
    v.pool_bytes = pool_bytes.load(r);
    v.pool_bytes_high_water = pool_bytes_high_water.load(r);
    v.malformed = malformed.snapshot();
    return v;
  }
};

}  // namespace sectorflow::consumer::nodegroup
