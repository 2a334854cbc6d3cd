// One NodeGroup as a relay thread sees it: a PUSH socket connected to the NodeGroup's data port
// for this thread, and a monitor that tells whether the connection is up.
//
// Sending never queues for a peer that is not connected (ZMQ_IMMEDIATE). A send that would block
// waits while the peer is connected (back-pressure from a live but busy NodeGroup) or, for a new
// socket, until the connection grace passes, and never longer than the caller's timeout: a
// NodeGroup that died costs one failed send per message, and one that is connected but does not
// read costs one timeout, after which the relay stops sending it the scan (relay.hpp), instead of
// a stall of the whole thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <zmq.hpp>

#include "sectorflow/security/curve.hpp"

namespace sectorflow::aggregator::detail {

/// How a send ended.
enum class SendResult {
  kSent,
  kUnreachable,  ///< not connected (gone, or never came up within the grace), closed, or stopping
  kBlocked,      ///< connected, but its queue stayed full for the whole timeout: it does not read
};

/// How a relay thread's socket to one NodeGroup is made (named fields: several share a type).
struct DownstreamSettings {
  int hwm = 1;                          ///< ZMQ_SNDHWM, messages
  int sndbuf_bytes = 0;                 ///< ZMQ_SNDBUF; 0: the kernel's autotuning
  std::chrono::milliseconds grace{0};   ///< how long an endpoint may take to come up
  /// Bounds how long the messages still queued when the last holder lets go are delivered: a scan
  /// is over at the relay once its messages are queued, not once they have arrived.
  std::chrono::milliseconds drain{0};
  security::CurveServer curve;          ///< makes the socket a CURVE server (the ZAP handler checks the NodeGroup's key)
};

class Downstream {
 public:
  /// Connects a PUSH socket to `endpoint`. Throws zmq::error_t if the socket cannot be made.
  Downstream(zmq::context_t& context, std::string uid, std::string endpoint, const DownstreamSettings& settings);
  /// Closes with the drain linger, unless closed before.
  ~Downstream();
  Downstream(const Downstream&) = delete;
  Downstream& operator=(const Downstream&) = delete;

  /// Sends `count` parts as one message, moving them out, waiting at most `timeout` while it
  /// would block. When not sent, the parts are left untouched or emptied.
  SendResult send(zmq::message_t* parts, std::size_t count, const std::atomic<bool>& stop,
                  std::chrono::milliseconds timeout) {
    if (open_ && try_send(parts, count)) return SendResult::kSent;
    return send_slow(parts, count, stop, timeout);
  }

  /// Closes the socket; later sends fail at once. `linger` bounds how long messages already
  /// queued may still be delivered (0 when the NodeGroup left: nobody is there to take them).
  void close(std::chrono::milliseconds linger = std::chrono::milliseconds(0));
  bool open() const { return open_; }
  const std::string& uid() const { return uid_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  bool try_send(zmq::message_t* parts, std::size_t count);
  SendResult send_slow(zmq::message_t* parts, std::size_t count, const std::atomic<bool>& stop,
                       std::chrono::milliseconds timeout);
  /// Reads the monitor's pending events into connected_ / ever_connected_.
  void read_events();

  std::string uid_;
  std::string endpoint_;
  std::chrono::milliseconds drain_;
  zmq::socket_t socket_;
  zmq::socket_t monitor_;
  bool open_ = true;
  bool connected_ = false;
  bool ever_connected_ = false;
  std::chrono::steady_clock::time_point grace_end_;
};

}  // namespace sectorflow::aggregator::detail
