// The thresholds of one scan in one NodeGroup, shared by its counting threads.
//
// Fixed thresholds (ThresholdSettings::fixed) are decided at once. Otherwise the counting threads
// offer their first complete frames, each read once into the scan's ThresholdSample (thresholds.hpp)
// when offered; the frames themselves wait, packed in their pool slots, to be counted once the
// thresholds are decided: from the first sample_frames offered; in a scan with fewer complete
// frames, from all of them once every counting thread has seen the end of the scan; earlier,
// with what was offered so far, when a thread's pool is full. Deciding computes the
// statistics as stempy does (thresholds.hpp), then a fixed threshold replaces its computed value
// (the rule of sectorflow.consumer.counting.thresholds_for_scan). Thread-safe.
//
// Shared thresholds (ThresholdSettings::share_ms > 0; docs/contracts.md, "One scan, one set of
// thresholds"): where it would decide, the sampler closes its sample instead and waits for the
// scan's thresholds, fitted by rank 0 from every NodeGroup's sample (take_sample, adopt); frames
// keep waiting meanwhile, and it decides from its own sample once share_ms have passed
// (decide_if_overdue, settle), so a missing rank 0 costs a bounded wait, not the scan.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sectorflow/consumer/counting/calibration.hpp"
#include "sectorflow/consumer/counting/electron_counter.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_settings.hpp"
#include "sectorflow/consumer/counting/thresholds.hpp"

namespace sectorflow::consumer::nodegroup {

class ThresholdSampler {
 public:
  ThresholdSampler(const ThresholdSettings& settings, std::shared_ptr<const counting::Calibration> calibration);

  /// Adds a complete frame to the sample (read during the call). Decides when the sample is full.
  /// Returns false if already decided (not taken). `blocks`: only those pixels, the sectors an
  /// incomplete frame holds (nullptr: the whole frame).
  bool offer(const std::uint16_t* frame, const std::vector<counting::PixelBlock>* blocks = nullptr);
  /// Decides now with the frames offered so far (no-op if decided).
  void decide();
  /// The pool is full: decides now as decide() unless the thresholds are shared and their wait has
  /// not passed; then closes the sample and waits up to `wait` for them. Returns decided().
  bool settle(std::chrono::milliseconds wait);
  /// Decides from its own sample if the shared thresholds did not come within share_ms.
  void decide_if_overdue();
  /// The closed sample, once, for the job to fit the scan's thresholds from; nothing if it is not
  /// closed, was taken, or the sampler decided.
  std::optional<counting::SampleHistogram> take_sample();
  /// Counts with the scan's thresholds (a fixed threshold of the settings still replaces its value).
  /// No-op if decided. Returns whether they were adopted.
  bool adopt(const counting::ThresholdStatistics& statistics);
  /// After decided(): whether the thresholds are the scan's (adopted), not this NodeGroup's own.
  bool shared() const { return shared_; }
  /// A counting thread has offered every complete frame of the scan it will get; when all
  /// `threads` have, the sample is what the NodeGroup received and the thresholds are decided.
  void worker_ended(std::uint32_t threads);
  bool decided() const { return decided_.load(std::memory_order_acquire); }
  /// After decided(): the options to count with, or nothing with error() saying why.
  const std::optional<counting::CountingOptions>& options() const { return options_; }
  const counting::ThresholdStatistics& statistics() const { return statistics_; }
  const std::string& error() const { return error_; }

 private:
  void decide_locked();
  /// The sample is full or all there is: decides, or closes it to wait for the shared thresholds.
  void close_locked();
  bool sharing() const { return settings_.share_ms > 0; }

  ThresholdSettings settings_;
  std::shared_ptr<const counting::Calibration> calibration_;
  std::mutex mutex_;
  std::optional<counting::ThresholdSample> sample_;  // under mutex_; none with fixed thresholds or once decided
  std::string sample_error_;           // why a frame could not be added, under mutex_
  std::uint32_t ended_ = 0;
  // Shared thresholds, under mutex_: the sample is closed (no frame joins it) since closed_at_; taken_ once handed out.
  std::optional<std::chrono::steady_clock::time_point> closed_at_;
  bool taken_ = false;
  std::condition_variable decided_changed_;
  bool shared_ = false;  // written before decided_ is set
  std::atomic<bool> decided_{false};
  // Written once under mutex_ before decided_ is set; read-only afterwards.
  std::optional<counting::CountingOptions> options_;
  counting::ThresholdStatistics statistics_;
  std::string error_;
};

}  // namespace sectorflow::consumer::nodegroup
