#include "sectorflow/consumer/counting_worker.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "envelope.hpp"
#include "send_until.hpp"

namespace sectorflow::consumer {

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
                               const NodeGroupSettings& settings, NodeGroupCounters& counters, WorkerHooks hooks)
    : settings_(settings),
      counters_(counters),
      hooks_(std::move(hooks)),
      assembler_(settings.geometry, settings.slots_per_thread()) {
  for (std::uint32_t r = 0; r < settings.receivers; ++r) {
    zmq::socket_t pull(context, zmq::socket_type::pull);
    pull.set(zmq::sockopt::linger, 0);
    pull.bind(endpoint_prefix + std::to_string(r));
    pulls_.push_back(std::move(pull));
  }
  held_.resize(settings.receivers);
  silent_.assign(settings.receivers, false);
}

void CountingWorker::run(const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed)) {
    for (int i = 0; i < kBatch && !stop.load(std::memory_order_relaxed); ++i) {
      place_held();
      if (read_ready(i == 0 ? detail::kPollInterval : std::chrono::milliseconds(0))) {
        stalled_since_.reset();
        continue;
      }
      if (!force_progress()) break;
    }
    poll_decisions();
  }
}

bool CountingWorker::read_ready(std::chrono::milliseconds wait) {
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

void CountingWorker::receive(std::uint32_t receiver) {
  zmq::message_t first;
  if (!pulls_[receiver].recv(first, zmq::recv_flags::dontwait)) return;
  silent_[receiver] = false;
  if (!first.more()) {
    handle(first, nullptr);
    return;
  }
  zmq::message_t payload;
  (void)pulls_[receiver].recv(payload);  // the rest of a multipart message is already here
  Envelope envelope;
  if (assembler_.full() && detail::read_envelope(first.data(), first.size(), envelope) && needs_slot(envelope)) {
    held_[receiver] = Held{std::move(first), std::move(payload)};
    return;
  }
  handle(first, &payload);
}

bool CountingWorker::needs_slot(const Envelope& envelope) {
  if (envelope.kind != Envelope::kData) return false;
  const auto it = scans_.find(envelope.scan);
  if (it != scans_.end() && envelope.position < it->second.counted.size() && it->second.counted[envelope.position]) {
    return false;  // late: dropped without a slot
  }
  return !assembler_.find(envelope.scan, envelope.frame);
}

void CountingWorker::place_held() {
  for (std::optional<Held>& held : held_) {
    if (!held) continue;
    Envelope envelope;
    (void)detail::read_envelope(held->first.data(), held->first.size(), envelope);
    if (assembler_.full() && needs_slot(envelope)) continue;
    handle(held->first, &held->payload);
    held.reset();
  }
}

bool CountingWorker::force_progress() {
  if (std::none_of(held_.begin(), held_.end(), [](const std::optional<Held>& h) { return h.has_value(); })) {
    return false;  // nothing waits for a slot: idle, not stuck
  }
  bool waiting_on_live = false;
  for (std::uint32_t r = 0; r < pulls_.size(); ++r) waiting_on_live = waiting_on_live || (!held_[r] && !silent_[r]);
  if (waiting_on_live) {
    const auto now = std::chrono::steady_clock::now();
    if (!stalled_since_) stalled_since_ = now;
    if (now - *stalled_since_ < kStallBeforeEviction) return false;
    for (std::uint32_t r = 0; r < pulls_.size(); ++r) {
      if (!held_[r]) silent_[r] = true;
    }
  }
  stalled_since_.reset();
  make_room(oldest_held());
  return true;
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> CountingWorker::oldest_held() const {
  std::optional<std::pair<std::uint32_t, std::uint32_t>> oldest;
  for (const std::optional<Held>& held : held_) {
    if (!held) continue;
    Envelope envelope;
    (void)detail::read_envelope(held->first.data(), held->first.size(), envelope);
    const std::pair<std::uint32_t, std::uint32_t> frame{envelope.scan, envelope.frame};
    if (!oldest || frame < *oldest) oldest = frame;
  }
  return oldest;
}

void CountingWorker::handle(zmq::message_t& first, zmq::message_t* payload) {
  Envelope envelope;
  if (!detail::read_envelope(first.data(), first.size(), envelope)) return;  // cannot happen: we sent it
  if (envelope.kind == Envelope::kData && payload != nullptr) {
    on_data(envelope, payload->data());
    return;
  }
  ScanWork& w = work(envelope.scan);
  w.ended.insert(envelope.receiver);
  if (w.ended.size() == settings_.receivers && !w.ending) {
    w.ending = true;
    w.sampler->worker_ended(settings_.counting_threads);
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

void CountingWorker::on_data(const Envelope& envelope, const void* payload) {
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
  if (!slot) {
    slot = assembler_.acquire(envelope.scan, envelope.frame, envelope.position);
    while (!slot) {  // cannot happen: receive() holds back what needs a slot the full pool lacks
      make_room(std::pair{envelope.scan, envelope.frame});
      slot = assembler_.acquire(envelope.scan, envelope.frame, envelope.position);
    }
    const auto used = counters_.pool_slots_in_use.fetch_add(1, std::memory_order_relaxed) + 1;
    raise_high_water(counters_.pool_slots_high_water, used);
  }
  ScanWork& target = work(envelope.scan);  // make_room may have finished other scans, never this one
  switch (assembler_.add(*slot, envelope.sector, payload)) {
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
  if (!w.sampler->decided() && w.sampler->offer(assembler_.pixels(slot))) {
    w.waiting.push_back(slot);
    if (w.sampler->decided()) flush_waiting(w);
    return;
  }
  count_slot(w, slot, {});
}

void CountingWorker::count_slot(ScanWork& w, std::size_t slot, std::vector<std::uint32_t> missing) {
  const std::uint64_t position = assembler_.position(slot);
  w.counted[position] = true;
  if (usable(w)) {
    w.counter->count(assembler_.pixels(slot), events_);
    w.part.positions.push_back(position);
    w.part.events.insert(w.part.events.end(), events_.begin(), events_.end());
    w.part.offsets.push_back(w.part.events.size());
    if (missing.empty()) {
      ++w.part.frames_complete;
      counters_.frames_complete.fetch_add(1, std::memory_order_relaxed);
    } else {
      ++w.part.frames_incomplete;
      counters_.frames_incomplete.fetch_add(1, std::memory_order_relaxed);
      w.part.incomplete_positions.push_back(position);
      w.part.incomplete_missing_sectors.push_back(std::move(missing));
    }
  } else {
    ++w.part.uncounted_frames;
    counters_.uncounted_frames.fetch_add(1, std::memory_order_relaxed);
  }
  release(slot);
}

void CountingWorker::release(std::size_t slot) {
  assembler_.release(slot);
  counters_.pool_slots_in_use.fetch_sub(1, std::memory_order_relaxed);
}

void CountingWorker::flush_waiting(ScanWork& w) {
  std::vector<std::size_t> waiting;
  waiting.swap(w.waiting);
  for (const std::size_t slot : waiting) count_slot(w, slot, {});
}

void CountingWorker::make_room(std::optional<std::pair<std::uint32_t, std::uint32_t>> wanted) {
  // Complete frames held for a sample: decide with the sample so far, which frees them.
  for (auto& [scan, w] : scans_) {
    if (!w.waiting.empty()) {
      w.sampler->decide();
      flush_waiting(w);
      return;
    }
  }
  // Receivers wait for a frame older than all in the pool: those were started by a receiver running
  // ahead (its sector of the wanted frame was lost), and the newest is the one they reach last.
  // Otherwise every receiver has gone past the oldest frame, which waits for what was lost.
  std::optional<std::size_t> victim = assembler_.oldest();
  if (wanted && *wanted < std::pair{assembler_.scan(*victim), assembler_.frame(*victim)}) victim = assembler_.newest();
  ScanWork& w = work(assembler_.scan(*victim));
  w.sampler->decide();
  ++w.part.evicted_frames;
  counters_.evicted_frames.fetch_add(1, std::memory_order_relaxed);
  count_slot(w, *victim, assembler_.fill_missing(*victim));
}

void CountingWorker::try_finish(std::uint32_t scan) {
  ScanWork& w = scans_.at(scan);
  if (!w.sampler->decided()) return;  // the other threads have not all offered their sample yet
  flush_waiting(w);
  for (const std::size_t slot : assembler_.slots_of(scan)) {
    count_slot(w, slot, assembler_.fill_missing(slot));
  }
  ScanResult part = std::move(w.part);
  scans_.erase(scan);
  hooks_.finished(scan, std::move(part));
}

void CountingWorker::poll_decisions() {
  std::vector<std::uint32_t> ending;
  for (auto& [scan, w] : scans_) {
    if (!w.waiting.empty() && w.sampler->decided()) flush_waiting(w);
    if (w.ending) ending.push_back(scan);
  }
  for (const std::uint32_t scan : ending) try_finish(scan);
}

}  // namespace sectorflow::consumer
