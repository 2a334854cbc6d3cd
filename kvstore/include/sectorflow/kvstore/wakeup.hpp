// A file descriptor another thread or a signal handler makes readable to wake a zmq_poll loop:
// the stop signal of the server and the command doorbell of the client's agent.
#pragma once

namespace sectorflow::kvstore {

class Wakeup {
 public:
  /// Throws std::system_error if the kernel refuses an eventfd.
  Wakeup();
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  /// Makes fd() readable. Never blocks; async-signal-safe and thread-safe.
  void notify() const noexcept;
  /// Makes fd() unreadable again until the next notify().
  void drain() const noexcept;
  /// Poll this for readability (ZMQ_POLLIN on a zmq_pollitem_t with socket == nullptr).
  int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace sectorflow::kvstore
