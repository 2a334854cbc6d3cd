// Counting many frames with several threads. The worker threads live as long as the
// BatchCounter (created once, joined by its destructor); the calling thread counts too, so a
// BatchCounter of one thread counts inline. Each thread owns a copy of the prototype counter.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "sectorflow/consumer/counting/electron_counter.hpp"

namespace sectorflow::consumer::counting {

class BatchCounter {
 public:
  /// `threads` >= 1 counting threads in all, the caller included. Throws CountingError for 0.
  BatchCounter(const ElectronCounter& prototype, unsigned threads);
  ~BatchCounter();
  BatchCounter(const BatchCounter&) = delete;
  BatchCounter& operator=(const BatchCounter&) = delete;

  unsigned threads() const { return static_cast<unsigned>(counters_.size()); }
  const FrameShape& shape() const { return counters_.front().shape(); }

  /// Counts frames[i] (shape().pixels() uint16 pixels each, read in place) into events[i].
  /// `events` is resized to frames.size(); inner vectors keep their capacity across calls.
  /// Blocks until every frame is counted; rethrows the first error a thread met. Calls from
  /// several threads are serialised.
  void count(const std::vector<const std::uint16_t*>& frames, std::vector<std::vector<std::uint32_t>>& events);

  /// Like count, but concatenates the events: frame i's are flat[offsets[i] .. offsets[i + 1]).
  /// `flat` and `offsets` are overwritten (offsets gets frames.size() + 1 entries); the per-frame
  /// vectors in between belong to the batch counter and are reused.
  void count_flat(const std::vector<const std::uint16_t*>& frames, std::vector<std::uint32_t>& flat,
                  std::vector<std::uint64_t>& offsets);

 private:
  void work(std::size_t counter_index);
  void drain(std::size_t counter_index);

  void run(const std::vector<const std::uint16_t*>& frames, std::vector<std::vector<std::uint32_t>>& events);

  std::mutex call_mutex_;  // one batch at a time
  std::vector<std::vector<std::uint32_t>> per_frame_;  // count_flat's reused per-frame events
  std::vector<ElectronCounter> counters_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  std::uint64_t generation_ = 0;
  unsigned busy_ = 0;
  bool stopping_ = false;
  // The batch in progress.
  const std::vector<const std::uint16_t*>* frames_ = nullptr;
  std::vector<std::vector<std::uint32_t>>* events_ = nullptr;
  std::size_t next_ = 0;  // next frame to hand out, under mutex_ (claimed in chunks)
  std::exception_ptr error_;
};

}  // namespace sectorflow::consumer::counting
