// A NodeGroup (protocol/SPEC.md steps 5 and 6): R receiver threads, one PULL socket per
// aggregator thread, forwarding over inproc to C counting threads that assemble and count.
// Scans are handed over as ScanResult, one per scan, in the order they finish.
//
//   aggregator thread r --tcp--> Receiver r --inproc (worker_of(frame), of C)--> CountingWorker c
//                                     \--> ScanTracker (expected / received / timeout)
//
// Memory: the assembly pool (settings.pool_frames frames, split over the counting threads) is
// allocated by the constructor and reused; what grows with a scan is its result (the events).
// Every thread and socket is owned here: the destructor stops the threads and joins them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "sectorflow/consumer/nodegroup/counting_worker.hpp"
#include "sectorflow/consumer/nodegroup/live_feed.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_counters.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_settings.hpp"
#include "sectorflow/consumer/nodegroup/receiver.hpp"
#include "sectorflow/consumer/nodegroup/scan_result.hpp"
#include "sectorflow/consumer/nodegroup/scan_tracker.hpp"
#include "sectorflow/consumer/nodegroup/threshold_sampler.hpp"

namespace sectorflow::consumer::nodegroup {

class NodeGroup {
 public:
  /// Validates the settings, allocates the pool, binds the sockets and starts the threads.
  /// Throws NodeGroupError (bad settings, a socket that cannot be bound).
  explicit NodeGroup(NodeGroupSettings settings);
  ~NodeGroup();
  NodeGroup(const NodeGroup&) = delete;
  NodeGroup& operator=(const NodeGroup&) = delete;

  const NodeGroupSettings& settings() const { return settings_; }
  /// ports[r]: where aggregator thread r pushes.
  const std::vector<std::uint16_t>& ports() const { return ports_; }
  /// The next finished scan, waiting up to `timeout`; nothing if none finished by then or stopped.
  /// With settings().drain_events, its frames are those take_counted did not hand out.
  std::optional<ScanResult> wait_scan(std::chrono::milliseconds timeout);
  /// With settings().drain_events: per scan still counting, the frames its counting threads handed
  /// out while it runs (frames only, no account), once they hold at least `min_events` events (0:
  /// whatever there is); taken, they are no longer here. The frames not taken go into the scan's
  /// result: a scan's frames are handed out once, by take_counted before its result, or with it.
  std::vector<ScanResult> take_counted(std::uint64_t min_events);
  NodeGroupCounterValues counters() const;
  /// Scans being received (not yet handed over by every receiver).
  std::vector<ScanTracker::Progress> progress() const { return tracker_.progress(); }
  /// Aborted scan `scan` (sectorflow abort): aggregator thread `receiver` closed it having forwarded
  /// `forwarded` messages here; that port's part ends once they came (ScanTracker::close_at).
  void close_aborted(std::uint32_t scan, std::uint32_t receiver, std::uint64_t forwarded) {
    tracker_.close_at(scan, receiver, forwarded);
  }
  /// Scans whose data are all in, being counted by the counting threads.
  std::size_t scans_counting() const;
  /// The frames counted since the last call, for the live view (empty unless settings().live).
  LiveBatch take_live();
  /// The columns each counted frame is imaged into (VirtualImager::columns); empty without virtual images.
  std::vector<std::string> columns() const { return imager_ ? imager_->columns() : std::vector<std::string>{}; }

  /// Frames the live feed dropped because nobody took them in time (settings().live_buffer_frames).
  std::uint64_t live_dropped() const { return live_ ? live_->dropped() : 0; }

  /// Shared thresholds (ThresholdSettings::share_ms): the samples closed since the last call, by scan.
  std::vector<std::pair<std::uint32_t, counting::SampleHistogram>> take_samples();
  /// Shared thresholds: counts `scan` with these statistics, fitted from every NodeGroup's sample.
  /// Returns false if the scan is not (or no longer) here, or already decided its thresholds.
  bool adopt_thresholds(std::uint32_t scan, const counting::ThresholdStatistics& statistics);

  /// Stops and joins the threads (idempotent); the sockets close with the object.
  void stop();

 private:
  std::shared_ptr<ThresholdSampler> sampler(std::uint32_t scan);
  void worker_finished(std::uint32_t scan, ScanResult&& part);
  void worker_counted(std::uint32_t scan, ScanResult&& frames);

  NodeGroupSettings settings_;
  NodeGroupCounters counters_;
  ScanTracker tracker_;
  std::atomic<bool> stop_{false};

  mutable std::mutex mutex_;  // samplers_, pending_, counted_, ready_
  std::condition_variable ready_changed_;
  std::map<std::uint32_t, std::shared_ptr<ThresholdSampler>> samplers_;
  std::map<std::uint32_t, std::pair<std::uint32_t, ScanResult>> pending_;  // parts received, merged result
  std::map<std::uint32_t, ScanResult> counted_;  // frames the counting threads handed out, not yet taken
  std::deque<ScanResult> ready_;

  std::unique_ptr<const VirtualImager> imager_;  // before the workers, which image with it
  std::unique_ptr<LiveFeed> live_;  // before the workers, which record into it
  zmq::context_t context_;  // before the sockets' owners: destroyed after them
  std::vector<std::unique_ptr<CountingWorker>> workers_;
  std::vector<std::unique_ptr<Receiver>> receivers_;
  std::vector<std::uint16_t> ports_;
  std::vector<std::thread> threads_;
};

}  // namespace sectorflow::consumer::nodegroup
