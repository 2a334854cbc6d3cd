#include "sectorflow/consumer/nodegroup/threshold_sampler.hpp"

#include <algorithm>
#include <utility>

#include "sectorflow/consumer/counting/errors.hpp"

namespace sectorflow::consumer::nodegroup {

ThresholdSampler::ThresholdSampler(const ThresholdSettings& settings, std::shared_ptr<const counting::Calibration> calibration)
    : settings_(settings), calibration_(std::move(calibration)) {
  if (settings_.fixed()) {
    statistics_.threshold_calculated = false;
    statistics_.background_threshold = settings_.background_threshold;
    statistics_.x_ray_threshold = settings_.xray_threshold;
    options_ = counting::CountingOptions::from(statistics_);
    decided_.store(true, std::memory_order_release);
  } else if (calibration_) {
    sample_.emplace(*calibration_);  // without one nothing is counted, so nothing is offered
  }
}

bool ThresholdSampler::offer(const std::uint16_t* frame, const std::vector<counting::PixelBlock>* blocks) {
  if (decided()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (decided()) return false;
  if (closed_at_) return true;  // waits for the shared thresholds with the sample's frames
  try {
    if (!sample_) throw counting::CountingError("no detector calibration to read the sample with");
    if (blocks != nullptr) {
      sample_->add(frame, *blocks);
    } else {
      sample_->add(frame);
    }
  } catch (const counting::CountingError& e) {
    sample_error_ = "thresholds from " + std::to_string((sample_ ? sample_->frames() : 0) + 1) + " frames: " + e.what();
  }
  if (!sample_error_.empty()) {
    decide_locked();
  } else if (sample_->frames() >= settings_.sample_frames) {
    close_locked();
  }
  return true;
}

void ThresholdSampler::decide() {
  if (decided()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  decide_locked();
}

void ThresholdSampler::worker_ended(std::uint32_t threads) {
  if (decided()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (++ended_ >= threads) close_locked();
}

void ThresholdSampler::close_locked() {
  if (!sharing() || !sample_) {
    decide_locked();
  } else if (!closed_at_) {
    closed_at_ = std::chrono::steady_clock::now();
  }
}

bool ThresholdSampler::settle(std::chrono::milliseconds wait) {
  if (decided()) return true;
  std::unique_lock<std::mutex> lock(mutex_);
  close_locked();
  if (decided()) return true;
  const auto due = *closed_at_ + std::chrono::milliseconds(settings_.share_ms);
  decided_changed_.wait_until(lock, std::min(due, std::chrono::steady_clock::now() + wait), [this] { return decided(); });
  if (!decided() && std::chrono::steady_clock::now() >= due) decide_locked();
  return decided();
}

void ThresholdSampler::decide_if_overdue() {
  if (decided()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_at_ && std::chrono::steady_clock::now() - *closed_at_ >= std::chrono::milliseconds(settings_.share_ms)) {
    decide_locked();
  }
}

std::optional<counting::SampleHistogram> ThresholdSampler::take_sample() {
  if (decided()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  if (decided() || !closed_at_ || taken_ || !sample_) return std::nullopt;
  taken_ = true;
  return sample_->histogram();
}

bool ThresholdSampler::adopt(const counting::ThresholdStatistics& statistics) {
  if (decided()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (decided()) return false;
  statistics_ = statistics;
  if (settings_.background_threshold > 0.0) statistics_.background_threshold = settings_.background_threshold;
  if (settings_.xray_threshold > 0.0) statistics_.x_ray_threshold = settings_.xray_threshold;
  options_ = counting::CountingOptions::from(statistics_);
  shared_ = true;
  sample_.reset();
  decided_.store(true, std::memory_order_release);
  decided_changed_.notify_all();
  return true;
}

void ThresholdSampler::decide_locked() {
  if (decided()) return;
  if (!sample_error_.empty()) {
    error_ = sample_error_;
  } else if (!sample_ || sample_->frames() == 0) {
    error_ = "no frame arrived to compute the thresholds from; set [counting] background_threshold "
             "and xray_threshold to count without a sample";
  } else {
    try {
      statistics_ = sample_->statistics({settings_.background_sigma, settings_.xray_sigma});
      if (settings_.background_threshold > 0.0) statistics_.background_threshold = settings_.background_threshold;
      if (settings_.xray_threshold > 0.0) statistics_.x_ray_threshold = settings_.xray_threshold;
      options_ = counting::CountingOptions::from(statistics_);
    } catch (const counting::CountingError& e) {
      error_ = "thresholds from " + std::to_string(sample_->frames()) + " frames: " + e.what();
    }
  }
  sample_.reset();  // lets its histogram go
  decided_.store(true, std::memory_order_release);
  decided_changed_.notify_all();
}

}  // namespace sectorflow::consumer::nodegroup
