#include "sectorflow/consumer/counting/batch_counter.hpp"

#include <algorithm>
#include <string>

#include "sectorflow/consumer/counting/errors.hpp"
#include "sectorflow/protocol/worker_thread.hpp"

namespace sectorflow::consumer::counting {

BatchCounter::BatchCounter(const ElectronCounter& prototype, unsigned threads) {
  if (threads == 0) {
    throw CountingError("batch counter needs at least one thread, got 0");
  }
  counters_.assign(threads, prototype);
  workers_.reserve(threads - 1);
  try {
    for (unsigned i = 1; i < threads; ++i) {
      workers_.push_back(protocol::start_worker_thread("sf-counter-" + std::to_string(i), [this, i] { work(i); }));
    }
  } catch (...) {
    // The destructor does not run for a half-built object: stop what was started.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    start_.notify_all();
    for (std::thread& worker : workers_) {
      worker.join();
    }
    throw;
  }
}

BatchCounter::~BatchCounter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& worker : workers_) {
    worker.join();
  }
}

void BatchCounter::count(const std::vector<const std::uint16_t*>& frames,
                         std::vector<std::vector<std::uint32_t>>& events) {
  std::lock_guard<std::mutex> call(call_mutex_);
  run(frames, events);
}

void BatchCounter::count_flat(const std::vector<const std::uint16_t*>& frames, std::vector<std::uint32_t>& flat,
                              std::vector<std::uint64_t>& offsets) {
  std::lock_guard<std::mutex> call(call_mutex_);
  run(frames, per_frame_);
  offsets.resize(frames.size() + 1);
  offsets[0] = 0;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    offsets[i + 1] = offsets[i] + per_frame_[i].size();
  }
  flat.resize(static_cast<std::size_t>(offsets.back()));
  for (std::size_t i = 0; i < frames.size(); ++i) {
    std::copy(per_frame_[i].begin(), per_frame_[i].end(), flat.begin() + static_cast<std::ptrdiff_t>(offsets[i]));
  }
}

void BatchCounter::run(const std::vector<const std::uint16_t*>& frames,
                       std::vector<std::vector<std::uint32_t>>& events) {
  events.resize(frames.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    frames_ = &frames;
    events_ = &events;
    next_ = 0;
    error_ = nullptr;
    busy_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  drain(0);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });
    frames_ = nullptr;
    events_ = nullptr;
    error = error_;
  }
  if (error) {
    std::rethrow_exception(error);
  }
}

void BatchCounter::work(std::size_t counter_index) {
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) {
      return;
    }
    seen = generation_;
    lock.unlock();
    drain(counter_index);
    lock.lock();
    if (--busy_ == 0) {
      done_.notify_all();
    }
  }
}

void BatchCounter::drain(std::size_t counter_index) {
  ElectronCounter& counter = counters_[counter_index];
  const std::size_t total = frames_->size();
  for (;;) {
    std::size_t index;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_ >= total) {
        return;
      }
      index = next_++;
    }
    try {
      counter.count((*frames_)[index], (*events_)[index]);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) {
        error_ = std::current_exception();
      }
      next_ = total;  // stop handing out frames
    }
  }
}

}  // namespace sectorflow::consumer::counting
