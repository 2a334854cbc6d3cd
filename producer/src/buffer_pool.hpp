// Sector buffers for zero-copy sends: a buffer leaves with its message and comes back when
// ZeroMQ's I/O thread releases it. The pool grows to what is in flight (bounded by the socket's
// high-water mark, since sends block there) and then reuses; private to the producer library.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace sectorflow::producer::detail {

class BufferPool {
 public:
  explicit BufferPool(std::size_t buffer_bytes) : bytes_(buffer_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  /// A free buffer of buffer_bytes (aligned for any pixel type), new if none is free.
  unsigned char* take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) {
      owned_.push_back(std::make_unique<unsigned char[]>(bytes_));
      return owned_.back().get();
    }
    unsigned char* buffer = free_.back();
    free_.pop_back();
    return buffer;
  }

  void give_back(void* buffer) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(static_cast<unsigned char*>(buffer));
  }

  /// A ReleaseFn for ZeroMQ: `hint` is the pool.
  static void release(void* data, void* hint) { static_cast<BufferPool*>(hint)->give_back(data); }

  std::size_t buffer_bytes() const { return bytes_; }
  std::size_t allocated() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return owned_.size();
  }

 private:
  std::size_t bytes_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<unsigned char[]>> owned_;
  std::vector<unsigned char*> free_;
};

}  // namespace sectorflow::producer::detail
