#include "sectorflow/producer/sibling_gate.hpp"

#include <chrono>
#include <string>

#include "sectorflow/producer/errors.hpp"

namespace sectorflow::producer {

SiblingGate::SiblingGate(std::uint32_t threads, std::uint64_t max_lead_frames)
    : max_lead_(max_lead_frames), reached_(threads), finished_(threads, false) {
  if (threads == 0) throw ProducerError("sibling gate: a receiver needs at least one producer thread");
  if (max_lead_frames < threads) {
    // Thread t's next frame is T past its last: with a smaller lead the slowest could never move.
    throw ProducerError("sibling gate: max_lead_frames " + std::to_string(max_lead_frames) + " is less than the " +
                        std::to_string(threads) + " producer threads of the receiver (producer.max_lead_frames)");
  }
  // Thread t starts at frame t (its first of f % T == t): nobody is ahead before anything moved.
  for (std::uint32_t t = 0; t < threads; ++t) reached_[t] = t;
}

bool SiblingGate::may_go(std::uint32_t thread_id, std::uint64_t frame) const {
  for (std::uint32_t s = 0; s < reached_.size(); ++s) {
    if (s == thread_id || finished_[s]) continue;
    if (frame > reached_[s] + max_lead_) return false;
  }
  return true;
}

bool SiblingGate::wait(std::uint32_t thread_id, std::uint64_t frame, const std::atomic<bool>& stop,
                       int stop_check_ms) {
  if (thread_id >= reached_.size()) {
    throw ProducerError("sibling gate: thread " + std::to_string(thread_id) + " of " +
                        std::to_string(reached_.size()));
  }
  std::unique_lock<std::mutex> lock(mutex_);
  while (!may_go(thread_id, frame)) {
    if (stop.load()) return false;
    changed_.wait_for(lock, std::chrono::milliseconds(stop_check_ms));
  }
  reached_[thread_id] = frame;
  lock.unlock();
  changed_.notify_all();
  return true;
}

void SiblingGate::finish(std::uint32_t thread_id) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (thread_id >= finished_.size() || finished_[thread_id]) return;
    finished_[thread_id] = true;
  }
  changed_.notify_all();
}

}  // namespace sectorflow::producer
