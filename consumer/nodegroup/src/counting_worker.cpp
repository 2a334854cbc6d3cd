#include "sectorflow/consumer/nodegroup/counting_worker.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "envelope.hpp"
#include "send_until.hpp"

namespace sectorflow::consumer::nodegroup {

using detail::Envelope;

namespace {

// Messages taken per poll before the thread looks at decisions made by the other threads.
constexpr int kBatch = 256;

void raise_high_water(std::atomic<std::uint64_t>& high, std::uint64_t value) {
  std::uint64_t seen = high.load(std::memory_order_relaxed);
  while (value > seen && !high.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

CountingWorker::CountingWorker(zmq::context_t& context, const std::string& endpoint_prefix,
                               const NodeGroupSettings& settings, NodeGroupCounters& counters, WorkerHooks hooks,
                               std::chrono::milliseconds stall_before_eviction)
    : stall_before_eviction_(stall_before_eviction),
      settings_(settings),
      counters_(counters),
      hooks_(std::move(hooks)),
      assembler_(settings.geometry, settings.slots_per_thread()) {
  for (std::uint32_t r = 0; r < settings.ports(); ++r) {
    zmq::socket_t pull(context, zmq::socket_type::pull);
    pull.set(zmq::sockopt::linger, 0);
    pull.set(zmq::sockopt::rcvhwm, detail::kHandOffHwm);
    pull.bind(endpoint_prefix + std::to_string(r));
    pulls_.push_back(std::move(pull));
  }
  held_.resize(settings.ports());
  silent_.assign(settings.ports(), false);
  // Port j carries receiver j % receivers, from that receiver's producer threads.
  for (std::uint32_t r = 0; r < settings.ports(); ++r) {
    stream_last_.emplace_back(settings.threads_of(r % settings.receivers));
  }
}

void CountingWorker::run(const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed)) {
    try {
      for (int i = 0; i < kBatch && !stop.load(std::memory_order_relaxed); ++i) {
        place_held();
        if (read_ready(i == 0 ? detail::kPollInterval : std::chrono::milliseconds(0))) {
          stalled_since_.reset();
          continue;
        }
        if (!force_progress()) break;
      }
      poll_decisions();
    } catch (const std::exception& error) {
      // The receivers checked every message, so this is a failure no check foresaw (memory, a
      // socket): counted and logged once, and the thread goes on with the next message.
      counters_.malformed.count(protocol::Refusal::kError, std::string("counting thread: ") + error.what());
    }
  }
}

bool CountingWorker::read_ready(std::chrono::milliseconds wait) {
  if (wait.count() == 0) {
    // Between the messages of a burst, a poll per message cost two system calls (BENCHMARKS.md's
    // profile of the NodeGroup).
    bool any = false;
    for (std::uint32_t r = 0; r < pulls_.size(); ++r) {
      if (!held_[r] && receive(r)) any = true;
    }
    return any;
  }
  items_.clear();
  item_receivers_.clear();
  for (std::uint32_t r = 0; r < pulls_.size(); ++r) {
    if (held_[r]) continue;
    items_.push_back({pulls_[r].handle(), 0, ZMQ_POLLIN, 0});
    item_receivers_.push_back(r);
  }
  if (items_.empty() || zmq::poll(items_.data(), items_.size(), wait) == 0) return false;
  for (std::size_t k = 0; k < items_.size(); ++k) {
    if (items_[k].revents & ZMQ_POLLIN) receive(item_receivers_[k]);
  }
  return true;
}

bool CountingWorker::receive(std::uint32_t receiver) {
  zmq::message_t first;
  if (!pulls_[receiver].recv(first, zmq::recv_flags::dontwait)) return false;
  silent_[receiver] = false;
  if (!first.more()) {
    handle(first, nullptr);
    return true;
  }
  zmq::message_t payload;
  (void)pulls_[receiver].recv(payload);  // the rest of a multipart message is already here
  Envelope envelope;
  if (detail::read_envelope(first.data(), first.size(), envelope) && envelope.kind == Envelope::kData) {
    // Each producer thread sends its frames in order: this one has gone past its earlier frames.
    auto& streams = stream_last_[receiver];
    streams[envelope.frame % streams.size()] = std::pair{envelope.scan, envelope.frame};
    if (needs_slot(envelope) && !may_take_slot(envelope)) {
      held_[receiver] = Held{std::move(first), std::move(payload)};
      return true;
    }
  }
  handle(first, &payload);
  return true;
}

bool CountingWorker::needs_slot(const Envelope& envelope) {
  if (envelope.kind != Envelope::kData) return false;
  const auto it = scans_.find(envelope.scan);
  if (it != scans_.end() && envelope.position < it->second.counted.size() && it->second.counted[envelope.position]) {
    return false;  // late: dropped without a slot
  }
  return !assembler_.find(envelope.scan, envelope.frame);
}

bool CountingWorker::may_take_slot(const Envelope& envelope) const {
  const std::size_t free = assembler_.capacity() - assembler_.in_use();
  if (free == 0) return false;
  if (free > 1 || assembler_.capacity() == 1) return true;
  // The last free slot is kept for a frame older than the newest in the pool: a receiver running
  // ahead must not take every slot while the others still need one for a frame it lost.
  const std::optional<std::size_t> newest = assembler_.newest();
  return newest && std::pair{envelope.scan, envelope.frame} < std::pair{assembler_.scan(*newest), assembler_.frame(*newest)};
}

void CountingWorker::place_held(bool use_reserve) {
  // Oldest first: a freed slot goes to the frame the most receivers are likely waiting for.
  std::vector<std::pair<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t>> order;
  for (std::uint32_t r = 0; r < held_.size(); ++r) {
    if (held_[r]) order.push_back({held_frame(r), r});
  }
  std::sort(order.begin(), order.end());
  for (const auto& [frame, r] : order) {
    Envelope envelope;
    (void)detail::read_envelope(held_[r]->first.data(), held_[r]->first.size(), envelope);
    if (needs_slot(envelope) && !may_take_slot(envelope) && !(use_reserve && !assembler_.full())) continue;
    use_reserve = false;
    handle(held_[r]->first, &held_[r]->payload);
    held_[r].reset();
  }
}

std::pair<std::uint32_t, std::uint32_t> CountingWorker::held_frame(std::uint32_t receiver) const {
  Envelope envelope;
  (void)detail::read_envelope(held_[receiver]->first.data(), held_[receiver]->first.size(), envelope);
  return {envelope.scan, envelope.frame};
}

bool CountingWorker::force_progress() {
  const auto is_held = [](const std::optional<Held>& h) { return h.has_value(); };
  if (std::none_of(held_.begin(), held_.end(), is_held)) return false;  // nothing waits for a slot: idle
  if (decide_samples()) return true;  // no loss: the thresholds come from a smaller sample
  if (const std::optional<std::size_t> lost = oldest_known_incomplete()) {
    evict(*lost);  // nothing more can come for it
    return true;
  }
  if (!std::all_of(held_.begin(), held_.end(), is_held)) {
    // A receiver still read may bring what the pool waits for; a slow one is waited for, and a dead
    // one ends its scans by timeout (end markers make its missing sectors known lost). Waiting
    // forever is only ruled out, against threads starving each other through shared receivers.
    // A receiver that stayed silent through a whole stall (its producer died) is not waited for
    // again until it delivers: a stall per frame would slow the live receivers to a frame per
    // stall, and the aggregator would declare this NodeGroup dead for their blocked sends.
    bool awaited = false;
    for (std::uint32_t r = 0; r < held_.size(); ++r) awaited = awaited || (!held_[r] && !silent_[r]);
    if (awaited) {
      const auto now = std::chrono::steady_clock::now();
      if (!stalled_since_) stalled_since_ = now;
      if (now - *stalled_since_ < stall_before_eviction_) return false;
      for (std::uint32_t r = 0; r < held_.size(); ++r) silent_[r] = silent_[r] || !held_[r];
    }
  }
  stalled_since_.reset();
  if (assembler_.full()) evict(victim(oldest_held()));
  place_held(/*use_reserve=*/true);
  return true;
}

bool CountingWorker::known_incomplete(std::size_t slot) const {
  const std::uint32_t scan = assembler_.scan(slot);
  const std::uint32_t frame = assembler_.frame(slot);
  const auto w = scans_.find(scan);
  // Port j carries sector j % R of the frames its member of the aggregation tier relays; which
  // member relays this frame is not known here, so a sector is lost only once every port that may
  // carry it went past the frame or ended.
  for (std::uint32_t port = 0; port < stream_last_.size(); ++port) {
    if (assembler_.has(slot, port % settings_.receivers)) continue;
    if (w != scans_.end() && w->second.ended.count(port)) continue;
    const auto& last = stream_last_[port][frame % stream_last_[port].size()];
    if (!last || *last <= std::pair{scan, frame}) return false;  // may still come
  }
  return true;
}

std::optional<std::size_t> CountingWorker::oldest_known_incomplete() const {
  std::optional<std::size_t> best;
  for (std::size_t slot = 0; slot < assembler_.capacity(); ++slot) {
    if (!assembler_.used(slot) || assembler_.complete(slot) || !known_incomplete(slot)) continue;
    if (!best || std::pair{assembler_.scan(slot), assembler_.frame(slot)} <
                     std::pair{assembler_.scan(*best), assembler_.frame(*best)}) {
      best = slot;
    }
  }
  return best;
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> CountingWorker::oldest_held() const {
  std::optional<std::pair<std::uint32_t, std::uint32_t>> oldest;
  for (std::uint32_t r = 0; r < held_.size(); ++r) {
    if (held_[r] && (!oldest || held_frame(r) < *oldest)) oldest = held_frame(r);
  }
  return oldest;
}

void CountingWorker::handle(zmq::message_t& first, zmq::message_t* payload) {
  Envelope envelope;
  if (!detail::read_envelope(first.data(), first.size(), envelope)) return;  // cannot happen: we sent it
  if (envelope.kind == Envelope::kData && payload != nullptr) {
    on_data(envelope, *payload);
    return;
  }
  ScanWork& w = work(envelope.scan);
  w.ended.insert(envelope.receiver);
  if (w.ended.size() == settings_.ports() && !w.ending) {
    w.ending = true;
    if (settings_.count) {
      for (const std::size_t slot : assembler_.slots_of(envelope.scan)) {
        if (std::find(w.waiting.begin(), w.waiting.end(), slot) == w.waiting.end()) sample_incomplete(w, slot);
      }
      w.sampler->worker_ended(settings_.counting_threads);
    }
    try_finish(envelope.scan);
  }
}

CountingWorker::ScanWork& CountingWorker::work(std::uint32_t scan) {
  auto [it, inserted] = scans_.try_emplace(scan);
  if (inserted) {
    it->second.sampler = hooks_.sampler(scan);
    it->second.part.scan_number = scan;
  }
  return it->second;
}

void CountingWorker::on_data(const Envelope& envelope, zmq::message_t& payload) {
  ScanWork& w = work(envelope.scan);
  if (w.counted.empty()) {
    w.counted.assign(std::size_t{envelope.scan_x} * envelope.scan_y, false);
    w.part.scan_x = envelope.scan_x;
    w.part.scan_y = envelope.scan_y;
  }
  if (envelope.position >= w.counted.size() || w.counted[envelope.position]) {
    // A sector of a frame already counted (early, the pool was full), or of another scan shape.
    ++w.part.late_messages;
    counters_.late_messages.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::optional<std::size_t> slot = assembler_.find(envelope.scan, envelope.frame);
  if (slot && assembler_.position(*slot) != envelope.position) {
    // The frame counter names the frame, the position places it: sectors of one frame that disagree
    // on where it goes cannot both be right, and the frame keeps its first sector's place.
    counters_.malformed.count(protocol::Refusal::kPosition,
                              "scan " + std::to_string(envelope.scan) + ", frame " + std::to_string(envelope.frame) +
                                  ", sector " + std::to_string(envelope.sector) + ": position " +
                                  std::to_string(envelope.position) + " differs from the position " +
                                  std::to_string(assembler_.position(*slot)) + " of the frame's first sector");
    return;
  }
  if (!slot) {
    slot = assembler_.acquire(envelope.scan, envelope.frame, envelope.position);
    while (!slot) {  // cannot happen: receive() holds back what needs a slot the full pool lacks
      if (!decide_samples()) evict(victim(std::pair{envelope.scan, envelope.frame}));
      slot = assembler_.acquire(envelope.scan, envelope.frame, envelope.position);
    }
    const auto used = counters_.pool_slots_in_use.fetch_add(1, std::memory_order_relaxed) + 1;
    raise_high_water(counters_.pool_slots_high_water, used);
  }
  ScanWork& target = work(envelope.scan);  // freeing a slot may have counted frames of other scans
  const FrameAssembler::Added added = assembler_.add(*slot, envelope.sector, payload);
  publish_pool_bytes();
  switch (added) {
    case FrameAssembler::Added::kDuplicate:
      ++target.part.duplicate_sectors;
      counters_.duplicate_sectors.fetch_add(1, std::memory_order_relaxed);
      break;
    case FrameAssembler::Added::kComplete:
      on_complete(target, *slot);
      break;
    case FrameAssembler::Added::kPartial:
      break;
  }
}

bool CountingWorker::usable(ScanWork& w) {
  if (w.counter) return true;
  if (!w.sampler->decided() || !w.sampler->options()) return false;
  w.counter.emplace(settings_.calibration, *w.sampler->options());
  return true;
}

void CountingWorker::on_complete(ScanWork& w, std::size_t slot) {
  // A frame that joined the sample incomplete and was completed since is counted with the sample.
  if (std::find(w.waiting.begin(), w.waiting.end(), slot) != w.waiting.end()) return;
  // Counting off (settings.count): no thresholds are needed, so no frame waits as a sample.
  if (settings_.count && !w.sampler->decided() && w.sampler->offer(assembler_.sample(slot))) {
    publish_pool_bytes();
    w.waiting.push_back(slot);
    if (w.sampler->decided()) flush_waiting(w);
    return;
  }
  count_slot(w, slot, {});
}

void CountingWorker::count_slot(ScanWork& w, std::size_t slot, std::vector<std::uint32_t> missing) {
  const std::uint64_t position = assembler_.position(slot);
  if (w.counted[position]) {
    // Another frame number at a position already counted: one frame per position, the first stands.
    std::uint64_t sectors = 0;
    for (std::uint32_t r = 0; r < settings_.receivers; ++r) sectors += assembler_.has(slot, r) ? 1 : 0;
    w.part.duplicate_sectors += sectors;
    counters_.duplicate_sectors.fetch_add(sectors, std::memory_order_relaxed);
    counters_.malformed.count(protocol::Refusal::kPosition,
                              "scan " + std::to_string(assembler_.scan(slot)) + ", frame " +
                                  std::to_string(assembler_.frame(slot)) + ": a second frame at position " +
                                  std::to_string(position) + ", already counted (one frame per position)");
    release(slot);
    return;
  }
  w.counted[position] = true;
  if (!settings_.count || usable(w)) {
    if (settings_.count) {
      w.counter->count_rows(assembler_.rows(slot), events_);
    } else {
      events_.clear();  // assembled only: recorded with no events
    }
    w.part.positions.push_back(position);
    if (hooks_.imager != nullptr) {
      hooks_.imager->image(events_, values_);
      w.part.images.add(*hooks_.imager, values_, events_);
      if (hooks_.live != nullptr) hooks_.live->record(w.part.scan_number, w.part.scan_x, w.part.scan_y, position, values_, events_);
    }
    w.part.events.insert(w.part.events.end(), events_.begin(), events_.end());
    w.part.offsets.push_back(w.part.events.size());
    w.part.sectors_counted.resize(settings_.receivers, 0);
    for (std::uint32_t r = 0; r < settings_.receivers; ++r) {
      if (std::find(missing.begin(), missing.end(), r) == missing.end()) ++w.part.sectors_counted[r];
    }
    if (missing.empty()) {
      ++w.part.frames_complete;
      counters_.frames_complete.fetch_add(1, std::memory_order_relaxed);
    } else {
      ++w.part.frames_incomplete;
      counters_.frames_incomplete.fetch_add(1, std::memory_order_relaxed);
      w.part.incomplete_positions.push_back(position);
      w.part.incomplete_missing_sectors.push_back(std::move(missing));
    }
    drain(w);
  } else {
    ++w.part.uncounted_frames;
    counters_.uncounted_frames.fetch_add(1, std::memory_order_relaxed);
  }
  release(slot);
}

void CountingWorker::release(std::size_t slot) {
  assembler_.release(slot);
  counters_.pool_slots_in_use.fetch_sub(1, std::memory_order_relaxed);
  publish_pool_bytes();
}

void CountingWorker::publish_pool_bytes() {
  const std::size_t held = assembler_.held_bytes();
  if (held == published_bytes_) return;
  if (held > published_bytes_) {
    const auto total = counters_.pool_bytes.fetch_add(held - published_bytes_, std::memory_order_relaxed) +
                       (held - published_bytes_);
    raise_high_water(counters_.pool_bytes_high_water, total);
  } else {
    counters_.pool_bytes.fetch_sub(published_bytes_ - held, std::memory_order_relaxed);
  }
  published_bytes_ = held;
}

void CountingWorker::flush_waiting(ScanWork& w) {
  std::vector<std::size_t> waiting;
  waiting.swap(w.waiting);
  for (const std::size_t slot : waiting) count_slot(w, slot, assembler_.missing(slot));
}

bool CountingWorker::decide_samples() {
  for (auto& [scan, w] : scans_) {
    if (!w.waiting.empty()) {
      // Shared thresholds: the full pool waits for them a poll interval at a time, up to their bound.
      if (w.sampler->settle(detail::kPollInterval)) flush_waiting(w);
      return true;
    }
  }
  return false;
}

std::size_t CountingWorker::victim(std::optional<std::pair<std::uint32_t, std::uint32_t>> wanted) const {
  // Receivers wait for a frame older than all in the pool: those were started by a receiver running
  // ahead, and the newest is the one they reach last. Otherwise the oldest has waited longest.
  const std::size_t oldest = *assembler_.oldest();
  if (wanted && *wanted < std::pair{assembler_.scan(oldest), assembler_.frame(oldest)}) return *assembler_.newest();
  return oldest;
}

void CountingWorker::evict(std::size_t slot) {
  ScanWork& w = work(assembler_.scan(slot));
  ++w.part.evicted_frames;
  counters_.evicted_frames.fetch_add(1, std::memory_order_relaxed);
  if (settings_.count && sample_incomplete(w, slot)) return;  // counted with the sample, when it is decided
  if (settings_.count) w.sampler->decide();
  count_slot(w, slot, assembler_.missing(slot));
}

bool CountingWorker::sample_incomplete(ScanWork& w, std::size_t slot) {
  if (w.sampler->decided()) return false;
  const protocol::Geometry& g = settings_.geometry;
  std::vector<counting::PixelBlock> blocks;
  for (std::uint32_t sector = 0; sector < g.n_sectors(); ++sector) {
    if (assembler_.has(slot, sector)) blocks.push_back({g.sector_row0(sector), g.sector_col0(sector), g.sector_rows,
                                                        g.sector_cols});
  }
  if (!w.sampler->offer(assembler_.sample(slot), &blocks)) return false;
  publish_pool_bytes();
  w.waiting.push_back(slot);
  if (w.sampler->decided()) flush_waiting(w);
  return true;
}

void CountingWorker::drain(ScanWork& w) {
  if (settings_.drain_events == 0 || !hooks_.counted || w.part.events.size() < settings_.drain_events) return;
  ScanResult frames;
  frames.scan_number = w.part.scan_number;
  frames.scan_x = w.part.scan_x;
  frames.scan_y = w.part.scan_y;
  frames.positions.swap(w.part.positions);
  frames.events.swap(w.part.events);
  frames.offsets.swap(w.part.offsets);
  w.part.offsets.assign(1, 0);
  frames.images = std::exchange(w.part.images, VirtualImages{});
  frames.incomplete_positions.swap(w.part.incomplete_positions);
  frames.incomplete_missing_sectors.swap(w.part.incomplete_missing_sectors);
  hooks_.counted(w.part.scan_number, std::move(frames));
}

void CountingWorker::try_finish(std::uint32_t scan) {
  ScanWork& w = scans_.at(scan);
  if (settings_.count && !w.sampler->decided()) return;  // the other threads have not all offered their sample yet
  flush_waiting(w);
  for (const std::size_t slot : assembler_.slots_of(scan)) {
    count_slot(w, slot, assembler_.missing(slot));
  }
  ScanResult part = std::move(w.part);
  scans_.erase(scan);
  hooks_.finished(scan, std::move(part));
}

void CountingWorker::poll_decisions() {
  std::vector<std::uint32_t> ending;
  for (auto& [scan, w] : scans_) {
    if (settings_.count) w.sampler->decide_if_overdue();
    if (!w.waiting.empty() && w.sampler->decided()) flush_waiting(w);
    if (w.ending) ending.push_back(scan);
  }
  for (const std::uint32_t scan : ending) try_finish(scan);
}

}  // namespace sectorflow::consumer::nodegroup
