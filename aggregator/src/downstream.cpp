#include "downstream.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

namespace sectorflow::aggregator::detail {
namespace {

// How long one wait for a blocked send lasts before the thread looks again at the connection.
constexpr std::chrono::milliseconds kSendSlice{20};

std::string monitor_address() {
  static std::atomic<std::uint64_t> next{0};
  return "inproc://sectorflow-aggregator-monitor-" + std::to_string(next.fetch_add(1));
}

}  // namespace

Downstream::Downstream(zmq::context_t& context, std::string uid, std::string endpoint,
                       const DownstreamSettings& settings)
    : uid_(std::move(uid)),
      endpoint_(std::move(endpoint)),
      drain_(settings.drain),
      socket_(context, zmq::socket_type::push),
      monitor_(context, zmq::socket_type::pair),
      grace_end_(std::chrono::steady_clock::now() + settings.grace) {
  socket_.set(zmq::sockopt::sndhwm, settings.hwm);
  // A long fat link needs a window of bandwidth x round trip; an explicit size replaces the
  // kernel's autotuning and is capped by net.core.wmem_max (docs/deployment.md "Long fat links").
  if (settings.sndbuf_bytes > 0) socket_.set(zmq::sockopt::sndbuf, settings.sndbuf_bytes);
  socket_.set(zmq::sockopt::immediate, 1);
  socket_.set(zmq::sockopt::linger, 0);
  security::apply(socket_, settings.curve);
  const std::string address = monitor_address();
  if (zmq_socket_monitor(socket_.handle(), address.c_str(), ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) != 0) {
    throw zmq::error_t();
  }
  monitor_.connect(address);
  socket_.connect(endpoint_);
}

Downstream::~Downstream() { close(drain_); }

void Downstream::close(std::chrono::milliseconds linger) {
  if (!open_) return;
  open_ = false;
  socket_.set(zmq::sockopt::linger, static_cast<int>(linger.count()));
  zmq_socket_monitor(socket_.handle(), nullptr, 0);
  monitor_.close();
  socket_.close();
}

bool Downstream::try_send(zmq::message_t* parts, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const bool last = i + 1 == count;
    const zmq::send_flags flags = last ? zmq::send_flags::dontwait : zmq::send_flags::sndmore | zmq::send_flags::dontwait;
    if (!socket_.send(parts[i], flags)) {
      // Only the first part can be refused: ZeroMQ takes a multipart message whole or not at all.
      return false;
    }
  }
  return true;
}

SendResult Downstream::send_slow(zmq::message_t* parts, std::size_t count, const std::atomic<bool>& stop,
                                 std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (open_ && !stop.load(std::memory_order_relaxed)) {
    read_events();
    const auto now = std::chrono::steady_clock::now();
    if (!connected_ && (ever_connected_ || now >= grace_end_)) return SendResult::kUnreachable;
    if (now >= deadline) return connected_ ? SendResult::kBlocked : SendResult::kUnreachable;
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLOUT, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    zmq::poll(&item, 1, std::min(kSendSlice, std::max(left, std::chrono::milliseconds(1))));
    if ((item.revents & ZMQ_POLLOUT) != 0 && try_send(parts, count)) return SendResult::kSent;
  }
  return SendResult::kUnreachable;
}

void Downstream::read_events() {
  zmq::message_t event;
  while (monitor_.recv(event, zmq::recv_flags::dontwait)) {
    if (event.more()) {
      std::uint16_t id = 0;
      if (event.size() >= sizeof id) std::memcpy(&id, event.data(), sizeof id);
      if (id == ZMQ_EVENT_CONNECTED) {
        connected_ = true;
        ever_connected_ = true;
      } else if (id == ZMQ_EVENT_DISCONNECTED) {
        connected_ = false;
      }
      (void)monitor_.recv(event, zmq::recv_flags::dontwait);  // the address frame
    }
  }
}

}  // namespace sectorflow::aggregator::detail
