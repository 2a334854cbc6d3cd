#include "sectorflow/security/zap_handler.hpp"

#include <zmq.h>

#include <array>
#include <chrono>
#include <string_view>

#include "sectorflow/security/errors.hpp"
#include "sectorflow/protocol/worker_thread.hpp"

namespace sectorflow::security {
namespace {

// The endpoint libzmq sends its ZAP requests to (RFC 27).
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
// How often the thread looks at stop_ while no request comes.
constexpr std::chrono::milliseconds kStopCheck{100};
// Request frames: version, request id, domain, address, routing id, mechanism, credentials.
constexpr std::size_t kRequestFrames = 7;
constexpr std::size_t kCurveKeyBytes = 32;
// Distinct refused keys reported (and remembered); beyond, refusals are only counted, so that a
// peer trying key after key cannot grow the set.
constexpr std::size_t kMaxReportedKeys = 1024;

std::string z85(const zmq::message_t& key) {
  std::array<char, 41> text{};
  if (key.size() != kCurveKeyBytes || zmq_z85_encode(text.data(), key.data<std::uint8_t>(), key.size()) == nullptr) {
    return "(no key)";
  }
  return text.data();
}

std::string monitor_address() {
  static std::atomic<std::uint64_t> next{0};
  return "inproc://sectorflow-handshake-monitor-" + std::to_string(next.fetch_add(1));
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context, const std::vector<CurveServer>& listeners,
                       const std::vector<zmq::socket_t*>& watched)
    : socket_(context, zmq::socket_type::rep) {
  for (const CurveServer& listener : listeners) {
    if (listener.enabled()) allowlists_[listener.domain] = listener.peers;
  }
  socket_.set(zmq::sockopt::linger, 0);
  try {
    socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& error) {
    throw SecurityError(std::string("cannot start the ZAP handler: ") + error.what());
  }
  for (zmq::socket_t* socket : watched) {
    const std::string address = monitor_address();
    if (zmq_socket_monitor(socket->handle(), address.c_str(),
                           ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0) {
      throw SecurityError(std::string("cannot monitor a socket's handshakes: ") + zmq_strerror(zmq_errno()));
    }
    monitors_.emplace_back(context, zmq::socket_type::pair);
    monitors_.back().set(zmq::sockopt::linger, 0);
    monitors_.back().connect(address);
  }
  thread_ = protocol::start_worker_thread("sf-zap", [this] { run(); });
}

ZapHandler::~ZapHandler() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

ZapStats ZapHandler::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<std::string> ZapHandler::take_refusals() {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  out.swap(new_refusals_);
  return out;
}

void ZapHandler::run() {
  std::vector<zmq::pollitem_t> items{{socket_.handle(), 0, ZMQ_POLLIN, 0}};
  for (zmq::socket_t& monitor : monitors_) items.push_back({monitor.handle(), 0, ZMQ_POLLIN, 0});
  while (!stop_.load()) {
    try {
      zmq::poll(items, kStopCheck);
      if ((items[0].revents & ZMQ_POLLIN) != 0) answer();
      for (std::size_t i = 1; i < items.size(); ++i) {
        if ((items[i].revents & ZMQ_POLLIN) != 0) observe(i - 1);
      }
    } catch (const zmq::error_t& error) {
      if (error.num() == ETERM) return;
      // EINTR and the like: poll again. A request that failed half-way is answered by libzmq's
      // timeout of the handshake, never by an accept.
    }
  }
  for (zmq::socket_t& monitor : monitors_) monitor.close();
  socket_.close();
}

void ZapHandler::observe(std::size_t i) {
  zmq::message_t event;
  zmq::message_t endpoint;
  if (!monitors_[i].recv(event, zmq::recv_flags::dontwait)) return;
  if (!event.more() || !monitors_[i].recv(endpoint, zmq::recv_flags::none)) return;
  const std::string where = endpoint.to_string();
  const std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.refused;
  ++stats_.refused_by_domain["(no CURVE)"];
  if (refused_keys_.size() < kMaxReportedKeys && refused_keys_.insert("endpoint " + where).second) {
    new_refusals_.push_back("refused a peer on " + where + " that failed the CURVE handshake before showing a key "
                            "(no key, or a wrong server key); further ones there are only counted");
  }
}

void ZapHandler::answer() {
  std::vector<zmq::message_t> frames;
  for (bool more = true; more;) {  // a longer request than RFC 27's is read whole, kept in part, refused
    zmq::message_t frame;
    if (!socket_.recv(frame, zmq::recv_flags::none)) return;
    more = frame.more();
    if (frames.size() <= kRequestFrames) frames.push_back(std::move(frame));
  }
  const auto text = [&frames](std::size_t i) { return i < frames.size() ? frames[i].to_string() : std::string(); };
  const std::string domain = text(2);
  const std::string address = text(3);
  const std::string mechanism = text(5);
  std::string identity;
  std::string refusal;
  if (frames.size() != kRequestFrames || text(0) != "1.0") {
    refusal = "not a ZAP 1.0 request";
  } else if (mechanism != "CURVE") {
    refusal = "mechanism " + mechanism + ", CURVE expected";
  } else if (const auto list = allowlists_.find(domain); list == allowlists_.end()) {
    refusal = "no allowlist for domain '" + domain + "'";
  } else if (const auto peer = list->second.find(z85(frames[6])); peer == list->second.end()) {
    refusal = "unknown key";
  } else {
    identity = peer->second;
  }
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (refusal.empty()) {
      ++stats_.accepted;
    } else {
      ++stats_.refused;
      ++stats_.refused_by_domain[domain];
      const std::string key = frames.size() == kRequestFrames ? z85(frames[6]) : "(no key)";
      if (refused_keys_.size() < kMaxReportedKeys && refused_keys_.insert(domain + " " + key).second) {
        new_refusals_.push_back("refused a CURVE peer at " + address + " on " + domain + ": public key " + key +
                                " (" + refusal + "); further refusals of this key are only counted");
      }
    }
  }
  const std::array<std::string, 6> reply{"1.0", text(1), refusal.empty() ? "200" : "400",
                                         refusal.empty() ? "OK" : refusal, identity, ""};
  for (std::size_t i = 0; i < reply.size(); ++i) {
    const zmq::send_flags flags = i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    socket_.send(zmq::buffer(reply[i]), flags);
  }
}

}  // namespace sectorflow::security
