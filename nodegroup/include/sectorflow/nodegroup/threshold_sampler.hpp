// The thresholds of one scan in one NodeGroup, shared by its counting threads.
//
// Fixed thresholds (ThresholdSettings::fixed) are decided at once. Otherwise the counting threads
// offer their first complete frames, each read once into the scan's ThresholdSample (thresholds.hpp)
// when offered; the frames themselves wait, packed in their pool slots, to be counted once the
// thresholds are decided: from the first sample_frames offered; in a scan with fewer complete
// frames, from all of them once every counting thread has seen the end of the scan; earlier,
// with what was offered so far, when a thread's pool is full. Deciding computes the
// statistics as stempy does (thresholds.hpp), then a fixed threshold replaces its computed value
// (the rule of sectorflow.counting.thresholds_for_scan). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sectorflow/counting/calibration.hpp"
#include "sectorflow/counting/electron_counter.hpp"
#include "sectorflow/nodegroup/nodegroup_settings.hpp"
#include "sectorflow/counting/thresholds.hpp"

namespace sectorflow::nodegroup {

class ThresholdSampler {
 public:
  ThresholdSampler(const ThresholdSettings& settings, std::shared_ptr<const counting::Calibration> calibration);

  /// Adds a complete frame to the sample (read during the call). Decides when the sample is full.
  /// Returns false if already decided (not taken). `blocks`: only those pixels, the sectors an
  /// incomplete frame holds (nullptr: the whole frame).
  bool offer(const std::uint16_t* frame, const std::vector<counting::PixelBlock>* blocks = nullptr);
  /// Decides now with the frames offered so far (no-op if decided).
  void decide();
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

  ThresholdSettings settings_;
  std::shared_ptr<const counting::Calibration> calibration_;
  std::mutex mutex_;
  std::optional<counting::ThresholdSample> sample_;  // under mutex_; none with fixed thresholds or once decided
  std::string sample_error_;           // why a frame could not be added, under mutex_
  std::uint32_t ended_ = 0;
  std::atomic<bool> decided_{false};
  // Written once under mutex_ before decided_ is set; read-only afterwards.
  std::optional<counting::CountingOptions> options_;
  counting::ThresholdStatistics statistics_;
  std::string error_;
};

}  // namespace sectorflow::nodegroup
