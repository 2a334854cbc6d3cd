// Keeps the producer threads of one receiver within a window of frames of each other.
//
// A receiver's T threads merge into one stream at aggregator thread r, and a NodeGroup assembles
// frames in a bounded pool. A thread that runs far ahead of a sibling (a source that is faster for
// one thread, a scheduler that favours it) fills the NodeGroup's pool with frames that wait for the
// sibling's sectors, and those sectors queue behind the ahead-runner's in the shared stream: the
// pool can then free a slot only by counting a frame early (the NodeGroup's counting_worker.hpp).
// Detector hardware paces its threads together; simulated and replayed sources do not, so the daemon gates
// them: a thread waits before a frame more than max_lead_frames past the frame its slowest
// unfinished sibling has reached. Nothing is dropped; the lead is bounded, and with it the spread
// of frames the pool must hold.
//
// One gate per scan, shared by the receiver's threads; every method is thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sectorflow::producer {

class SiblingGate {
 public:
  /// Throws ProducerError for no threads or a lead smaller than `threads` (a thread's next frame is
  /// `threads` past its last, so the slowest could never move).
  SiblingGate(std::uint32_t threads, std::uint64_t max_lead_frames);

  /// Blocks thread `thread_id` while `frame` is more than max_lead_frames past the frame reached by
  /// a sibling that has not finished, then records `frame` as reached. Returns false, without
  /// recording, when `stop` became true while waiting (checked every `stop_check_ms`).
  bool wait(std::uint32_t thread_id, std::uint64_t frame, const std::atomic<bool>& stop, int stop_check_ms);

  /// Thread `thread_id` sends nothing more in this scan (done, failed or stopped): nobody waits
  /// for it. Idempotent.
  void finish(std::uint32_t thread_id);

  std::uint32_t threads() const { return static_cast<std::uint32_t>(reached_.size()); }
  std::uint64_t max_lead_frames() const { return max_lead_; }

 private:
  bool may_go(std::uint32_t thread_id, std::uint64_t frame) const;

  std::uint64_t max_lead_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::uint64_t> reached_;  // frame each thread last reached (its first frame's number at start)
  std::vector<bool> finished_;
};

}  // namespace sectorflow::producer
