#include "sectorflow/consumer/nodegroup/nodegroup.hpp"

#include <algorithm>
#include <utility>

#include "sectorflow/protocol/worker_thread.hpp"

namespace sectorflow::consumer::nodegroup {
namespace {

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

NodeGroupSettings completed(NodeGroupSettings settings) {
  settings.validate();
  if (!settings.calibration) {
    settings.calibration =
        std::make_shared<counting::Calibration>(counting::FrameShape{settings.geometry.frame_rows, settings.geometry.frame_cols});
  }
  return settings;
}

template <typename T>
void append(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

void merge(ScanResult& into, ScanResult&& part) {
  if (into.scan_x == 0) {
    into.scan_x = part.scan_x;
    into.scan_y = part.scan_y;
  }
  const std::uint64_t base = into.events.size();
  append(into.positions, part.positions);
  append(into.events, part.events);
  for (std::size_t i = 1; i < part.offsets.size(); ++i) into.offsets.push_back(base + part.offsets[i]);
  into.images.append(std::move(part.images));
  append(into.incomplete_positions, part.incomplete_positions);
  for (auto& sectors : part.incomplete_missing_sectors) into.incomplete_missing_sectors.push_back(std::move(sectors));
  into.uncounted_frames += part.uncounted_frames;
  into.late_messages += part.late_messages;
  into.duplicate_sectors += part.duplicate_sectors;
  into.evicted_frames += part.evicted_frames;
  into.frames_complete += part.frames_complete;
  into.frames_incomplete += part.frames_incomplete;
  if (into.sectors_counted.size() < part.sectors_counted.size()) into.sectors_counted.resize(part.sectors_counted.size(), 0);
  for (std::size_t r = 0; r < part.sectors_counted.size(); ++r) into.sectors_counted[r] += part.sectors_counted[r];
}

}  // namespace

NodeGroup::NodeGroup(NodeGroupSettings settings)
    : settings_(completed(std::move(settings))),
      tracker_(settings_.ports(), std::chrono::milliseconds(static_cast<long>(settings_.scan_timeout_s * 1000.0)),
               settings_.max_open_scans),
      context_(static_cast<int>(std::min<std::uint32_t>(settings_.ports(), 4))) {
  std::vector<std::string> endpoints;
  if (settings_.detectors) {
    imager_ = std::make_unique<const VirtualImager>(*settings_.detectors, settings_.kernels, settings_.geometry.frame_rows,
                                                    settings_.geometry.frame_cols);
  }
  if (settings_.live) {
    // Events of a batch: room for frames of a few hundred electrons each; beyond, frames are dropped and counted.
    constexpr std::size_t kEventsPerFrame = 1024;
    live_ = std::make_unique<LiveFeed>(settings_.live_buffer_frames,
                                       std::size_t{settings_.live_buffer_frames} * kEventsPerFrame,
                                       imager_ ? imager_->columns() : std::vector<std::string>{});
  }
  WorkerHooks hooks{[this](std::uint32_t scan) { return sampler(scan); },
                    [this](std::uint32_t scan, ScanResult&& part) { worker_finished(scan, std::move(part)); },
                    [this](std::uint32_t scan, ScanResult&& frames) { worker_counted(scan, std::move(frames)); },
                    live_.get(), imager_.get()};
  for (std::uint32_t c = 0; c < settings_.counting_threads; ++c) {
    endpoints.push_back("inproc://counting-" + std::to_string(c) + "-from-");
    workers_.push_back(std::make_unique<CountingWorker>(context_, endpoints.back(), settings_, counters_, hooks));
    counters_.pool_slots += workers_.back()->pool_slots();
  }
  for (std::uint32_t r = 0; r < settings_.ports(); ++r) {
    receivers_.push_back(std::make_unique<Receiver>(context_, settings_, r, endpoints, tracker_, counters_));
    ports_.push_back(receivers_.back()->port());
  }
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    threads_.push_back(protocol::start_worker_thread("sf-count-" + std::to_string(w),
                                                     [this, worker = workers_[w].get()] { worker->run(stop_); }));
  }
  for (std::size_t r = 0; r < receivers_.size(); ++r) {
    threads_.push_back(protocol::start_worker_thread("sf-receive-" + std::to_string(r),
                                                     [this, receiver = receivers_[r].get()] { receiver->run(stop_); }));
  }
}

NodeGroup::~NodeGroup() { stop(); }

NodeGroupCounterValues NodeGroup::counters() const {
  NodeGroupCounterValues values = counters_.values();
  values.scans_evicted = tracker_.evicted();
  return values;
}

void NodeGroup::stop() {
  stop_.store(true);
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  ready_changed_.notify_all();
}

std::optional<ScanResult> NodeGroup::wait_scan(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_changed_.wait_for(lock, timeout, [this] { return !ready_.empty() || stop_.load(); });
  if (ready_.empty()) return std::nullopt;
  ScanResult result = std::move(ready_.front());
  ready_.pop_front();
  return result;
}

std::vector<ScanResult> NodeGroup::take_counted(std::uint64_t min_events) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ScanResult> taken;
  for (auto it = counted_.begin(); it != counted_.end();) {
    if (!it->second.positions.empty() && it->second.events.size() >= min_events) {
      taken.push_back(std::move(it->second));
      it = counted_.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

void NodeGroup::worker_counted(std::uint32_t scan, ScanResult&& frames) {
  std::lock_guard<std::mutex> lock(mutex_);
  ScanResult& so_far = counted_[scan];
  so_far.scan_number = scan;
  merge(so_far, std::move(frames));
}

LiveBatch NodeGroup::take_live() { return live_ ? live_->take() : LiveBatch{}; }

std::size_t NodeGroup::scans_counting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

std::shared_ptr<ThresholdSampler> NodeGroup::sampler(std::uint32_t scan) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& sampler = samplers_[scan];
  if (!sampler) sampler = std::make_shared<ThresholdSampler>(settings_.thresholds, settings_.calibration);
  return sampler;
}

std::vector<std::pair<std::uint32_t, counting::SampleHistogram>> NodeGroup::take_samples() {
  std::vector<std::shared_ptr<ThresholdSampler>> samplers;
  std::vector<std::uint32_t> scans;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [scan, sampler] : samplers_) {
      scans.push_back(scan);
      samplers.push_back(sampler);
    }
  }
  std::vector<std::pair<std::uint32_t, counting::SampleHistogram>> samples;
  for (std::size_t i = 0; i < samplers.size(); ++i) {
    if (auto sample = samplers[i]->take_sample()) samples.emplace_back(scans[i], std::move(*sample));
  }
  return samples;
}

bool NodeGroup::adopt_thresholds(std::uint32_t scan, const counting::ThresholdStatistics& statistics) {
  std::shared_ptr<ThresholdSampler> sampler;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = samplers_.find(scan);
    if (found == samplers_.end()) return false;
    sampler = found->second;
  }
  return sampler->adopt(statistics);
}

void NodeGroup::worker_finished(std::uint32_t scan, ScanResult&& part) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& [parts, result] = pending_[scan];
  if (parts == 0) result.scan_number = scan;
  merge(result, std::move(part));
  if (++parts < settings_.counting_threads) return;
  const auto untaken = counted_.find(scan);
  if (untaken != counted_.end()) {  // frames handed out while the scan ran and not taken: in its result
    merge(result, std::move(untaken->second));
    counted_.erase(untaken);
  }

  ScanTracker::Arrivals arrivals = tracker_.take(scan);
  result.routing = std::move(arrivals.routing);
  result.expected = std::move(arrivals.expected);
  result.received = std::move(arrivals.received);
  const bool several_runs = std::any_of(arrivals.runs.begin(), arrivals.runs.end(),
                                        [](const auto& port_runs) { return port_runs.size() > 1; });
  if (several_runs) {
    for (std::uint32_t port = 0; port < arrivals.runs.size(); ++port) {
      for (const ScanTracker::RunCount& run : arrivals.runs[port]) {
        result.runs.push_back(protocol::PortRun{port, run.run, run.expected, run.received});
      }
    }
  }
  result.bytes = arrivals.bytes;
  result.timed_out = arrivals.timed_out;
  result.evicted = arrivals.evicted;
  result.late_messages += arrivals.late;
  result.first_message_s = arrivals.first_message_s;
  result.last_message_s = arrivals.last_message_s;
  const auto sampler = samplers_.find(scan);
  if (sampler != samplers_.end()) {
    result.thresholds_known = sampler->second->decided() && sampler->second->options().has_value();
    result.statistics = sampler->second->statistics();
    result.threshold_error = sampler->second->error();
    result.thresholds_shared = sampler->second->decided() && sampler->second->shared();
    samplers_.erase(sampler);
  }
  result.sectors_counted.resize(settings_.receivers, 0);  // zeros when no frame was counted
  result.finished_s = wall_s();
  counters_.scans_finished.fetch_add(1, std::memory_order_relaxed);
  if (result.timed_out) counters_.scans_timed_out.fetch_add(1, std::memory_order_relaxed);
  ready_.push_back(std::move(result));
  pending_.erase(scan);
  ready_changed_.notify_all();
}

}  // namespace sectorflow::consumer::nodegroup
