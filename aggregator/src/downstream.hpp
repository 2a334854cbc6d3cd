// One NodeGroup as a relay thread sees it: a PUSH socket connected to the NodeGroup's data port
// for this thread, and a monitor that tells whether the connection is up.
//
// Sending never queues for a peer that is not connected (ZMQ_IMMEDIATE), and a send that would
// block waits only while the peer is connected (back-pressure from a live but busy NodeGroup,
// never a drop) or, for a new socket, until the connection grace passes. A NodeGroup that died
// therefore costs one failed send per message, not a stall of the whole thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <zmq.hpp>

namespace sectorflow::aggregator::detail {

class Downstream {
 public:
  /// Connects a PUSH socket to `endpoint`. Throws zmq::error_t if the socket cannot be made.
  Downstream(zmq::context_t& context, std::string uid, std::string endpoint, int hwm,
             std::chrono::milliseconds grace);
  ~Downstream();
  Downstream(const Downstream&) = delete;
  Downstream& operator=(const Downstream&) = delete;

  /// Sends `count` parts as one message, moving them out. Returns false (parts left untouched or
  /// emptied) when the NodeGroup is unreachable, the socket closed or `stop` is set.
  bool send(zmq::message_t* parts, std::size_t count, const std::atomic<bool>& stop) {
    if (open_ && try_send(parts, count)) return true;
    return send_slow(parts, count, stop);
  }

  /// Closes the socket; later sends fail at once. `linger` bounds how long messages already
  /// queued may still be delivered (0 when the NodeGroup left: nobody is there to take them).
  void close(std::chrono::milliseconds linger = std::chrono::milliseconds(0));
  bool open() const { return open_; }
  const std::string& uid() const { return uid_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  bool try_send(zmq::message_t* parts, std::size_t count);
  bool send_slow(zmq::message_t* parts, std::size_t count, const std::atomic<bool>& stop);
  /// Reads the monitor's pending events into connected_ / ever_connected_.
  void read_events();

  std::string uid_;
  std::string endpoint_;
  zmq::socket_t socket_;
  zmq::socket_t monitor_;
  bool open_ = true;
  bool connected_ = false;
  bool ever_connected_ = false;
  std::chrono::steady_clock::time_point grace_end_;
};

}  // namespace sectorflow::aggregator::detail
