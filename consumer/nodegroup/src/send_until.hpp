// Sending on an inproc PUSH that may be full (backpressure from a busy counting thread) without
// hanging a shutdown: wait for room in short polls and give up once `stop` is set.
#pragma once

#include <atomic>
#include <chrono>

#include <zmq.hpp>

namespace sectorflow::consumer::nodegroup::detail {

inline constexpr std::chrono::milliseconds kPollInterval{20};

/// Sends `message` (with `more` for all but the last part). False if stopped first.
inline bool send_until(zmq::socket_t& socket, zmq::message_t& message, bool more, const std::atomic<bool>& stop) {
  const auto flags = more ? (zmq::send_flags::sndmore | zmq::send_flags::dontwait) : zmq::send_flags::dontwait;
  while (!stop.load(std::memory_order_relaxed)) {
    if (socket.send(message, flags)) return true;
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLOUT, 0};
    zmq::poll(&item, 1, kPollInterval);
  }
  return false;
}

}  // namespace sectorflow::consumer::nodegroup::detail
