#include "sectorflow/producer/producer.hpp"

#include <exception>
#include <utility>
#include <zmq.hpp>

#include "buffer_pool.hpp"
#include "sectorflow/protocol/bad_entries.hpp"
#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/producer/errors.hpp"
#include "sectorflow/producer/routing.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/info_message.hpp"
#include "sectorflow/protocol/raw_file.hpp"

namespace sectorflow::producer {
namespace {

enum FrameState : std::uint8_t { kNotAnnounced = 0, kAnnounced = 1, kSent = 2 };

std::string scan_text(std::uint32_t scan) { return "scan " + std::to_string(scan); }

}  // namespace

const char* to_string(Mode mode) { return mode == Mode::kStreaming ? "streaming" : "fallback"; }

struct Producer::Impl {
  // Declared first so it is destroyed last: the context's termination releases queued messages,
  // whose buffers return to the pool.
  detail::BufferPool pool;
  zmq::context_t context{1};
  std::optional<zmq::socket_t> socket;

  bool in_scan = false;
  protocol::ServiceState state = protocol::ServiceState::kIdle;
  ScanRequest request;
  ScanDecision decision;
  std::vector<std::uint8_t> frames;  ///< FrameState per frame of the scan
  std::optional<protocol::RawFileWriter> writer;
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point last_status;
  protocol::BadEntries bad_entries;  ///< registrations skipped when routing from the replica

  explicit Impl(std::size_t sector_bytes) : pool(sector_bytes) {}
};

Producer::Producer(ProducerOptions options, kvstore::Client* kvstore)
    : options_(std::move(options)), kvstore_(kvstore) {
  options_.geometry.validate();
  if (options_.threads == 0 || options_.thread_id >= options_.threads) {
    throw ProducerError("producer " + options_.name() + ": thread " + std::to_string(options_.thread_id) + " of " +
                        std::to_string(options_.threads) +
                        "; expected a thread id from 0 to threads - 1 (threads: [[receivers]] threads, at least 1)");
  }
  if (options_.receiver >= options_.geometry.n_sectors()) {
    throw ProducerError("producer " + options_.name() + ": receiver " + std::to_string(options_.receiver) +
                        " has no sector; the geometry has " + std::to_string(options_.geometry.n_sectors()));
  }
  if (options_.send_hwm < 1) {
    throw ProducerError("producer " + options_.name() + ": send_hwm " + std::to_string(options_.send_hwm) +
                        " must be at least 1 (producer.send_hwm)");
  }
  if (!(options_.status_ttl_s >= 0.0)) {
    throw ProducerError("producer " + options_.name() + ": status_ttl_s " + std::to_string(options_.status_ttl_s) +
                        " must be set, at least 0 (kvstore.ttl_s)");
  }
  impl_ = std::make_unique<Impl>(options_.geometry.sector_bytes());
  if (!options_.aggregator_endpoint.empty()) {
    zmq::socket_t socket(impl_->context, zmq::socket_type::push);
    socket.set(zmq::sockopt::sndhwm, options_.send_hwm);
    socket.set(zmq::sockopt::sndtimeo, kStopCheckMs);  // only to notice stop(); sends are retried
    socket.set(zmq::sockopt::linger, options_.linger_ms);
    try {
      socket.connect(options_.aggregator_endpoint);
    } catch (const zmq::error_t& error) {
      throw ProducerError("producer " + options_.name() + ": cannot connect to aggregator endpoint '" +
                          options_.aggregator_endpoint + "': " + error.what());
    }
    impl_->socket.emplace(std::move(socket));
  }
  publish(protocol::ServiceState::kIdle);
}

Producer::~Producer() = default;

void Producer::stop() { stop_.store(true); }

void Producer::publish(protocol::ServiceState state, const std::string& error) {
  impl_->state = state;
  impl_->last_status = std::chrono::steady_clock::now();
  if (kvstore_ == nullptr) return;
  protocol::ServiceStatus status;
  status.state = std::string(protocol::to_string(state));
  status.scan = scan_;
  status.messages = messages_;
  status.bytes = bytes_;
  status.extra["receiver"] = std::int64_t{options_.receiver};
  status.extra["thread"] = std::int64_t{options_.thread_id};
  if (state != protocol::ServiceState::kIdle || scan_ != 0) {
    status.extra["mode"] = std::string(to_string(impl_->decision.mode));
    status.extra["nodegroups"] = static_cast<std::int64_t>(impl_->decision.routing.size());
    status.extra["announced"] = static_cast<std::int64_t>(impl_->decision.announced);
    if (impl_->decision.mode == Mode::kFallback) status.extra["fallback_dir"] = options_.fallback_dir;
  }
  if (!error.empty()) status.extra["error"] = error;
  if (const std::uint64_t bad = impl_->bad_entries.count(); bad != 0) {
    status.extra["bad_records"] = static_cast<std::int64_t>(bad);
  }
  kvstore_->set(protocol::status_key(protocol::kServiceProducer, options_.name()), status.encode(),
                options_.status_ttl_s);
}

void Producer::fail(const std::string& error) {
  impl_->in_scan = false;
  impl_->writer.reset();
  try {
    publish(protocol::ServiceState::kError, error);
  } catch (const std::exception&) {
    // The original failure is what the caller must see.
  }
}

ScanDecision Producer::begin_scan(const ScanRequest& request, const std::vector<std::uint32_t>& frames) {
  const std::string where = scan_text(request.scan_number) + ", producer " + options_.name();
  if (impl_->in_scan) {
    throw ProducerError(where + ": scan " + std::to_string(impl_->request.scan_number) +
                        " is still running; end_scan() it first");
  }
  if (stop_) throw ProducerStopped(where + ": the producer was stopped");
  if (request.scan_x == 0 || request.scan_y == 0) {
    throw ProducerError(where + ": scan shape " + std::to_string(request.scan_x) + " x " +
                        std::to_string(request.scan_y) + " is empty; expected at least 1 x 1");
  }
  const std::uint64_t n_frames = std::uint64_t{request.scan_x} * request.scan_y;
  if (n_frames > std::uint64_t{0xFFFFFFFF}) {
    throw ProducerError(where + ": scan shape " + std::to_string(request.scan_x) + " x " +
                        std::to_string(request.scan_y) + " has more frames than a uint32 frame number holds");
  }
  std::vector<std::uint8_t> state(n_frames, kNotAnnounced);
  for (const std::uint32_t frame : frames) {
    if (frame >= n_frames) {
      throw ProducerError(where + ": frame " + std::to_string(frame) + " is outside the " +
                          std::to_string(request.scan_x) + " x " + std::to_string(request.scan_y) + " scan");
    }
    if (frame % options_.threads != options_.thread_id) {
      throw ProducerError(where + ": frame " + std::to_string(frame) + " belongs to thread " +
                          std::to_string(frame % options_.threads) + " (frame % " + std::to_string(options_.threads) +
                          "), not to thread " + std::to_string(options_.thread_id));
    }
    if (state[frame] != kNotAnnounced) {
      throw ProducerError(where + ": frame " + std::to_string(frame) + " is listed twice");
    }
    state[frame] = kAnnounced;
  }

  ScanDecision decision;
  decision.scan_number = request.scan_number;
  if (request.routing) {
    decision.routing = *request.routing;
  } else if (kvstore_ != nullptr) {
    decision.routing = routing_from_replica(*kvstore_, impl_->bad_entries);
  } else {
    throw ProducerError(where + ": no routing list in the request and no kvstore client to read NodeGroups from");
  }
  check_routing(decision.routing, request.scan_number);
  decision.mode = decision.routing.empty() ? Mode::kFallback : Mode::kStreaming;
  decision.announced = frames.size();

  if (decision.mode == Mode::kStreaming) {
    if (!impl_->socket) {
      throw ProducerError(where + ": NodeGroups are registered but the producer has no aggregator endpoint");
    }
    decision.counts = count_routes(decision.routing, frames);
  } else {
    if (options_.fallback_dir.empty()) {
      throw ProducerError(where + ": no NodeGroup registered and no fallback directory (producer.fallback_dir)");
    }
    impl_->writer.emplace(options_.fallback_dir, request.scan_number, options_.receiver, options_.thread_id,
                          options_.geometry);
    decision.file = impl_->writer->path();
  }

  impl_->request = request;
  impl_->decision = decision;
  impl_->frames = std::move(state);
  impl_->in_scan = true;
  impl_->started = std::chrono::steady_clock::now();
  scan_ = request.scan_number;
  messages_ = 0;
  bytes_ = 0;
  publish(decision.mode == Mode::kStreaming ? protocol::ServiceState::kStreaming : protocol::ServiceState::kWritingToDisk);

  if (decision.mode == Mode::kStreaming) {
    protocol::InfoMessage info{request.scan_number, options_.receiver, options_.thread_id, request.scan_x,
                               request.scan_y, decision.routing, decision.counts};
    const std::string bytes = protocol::encode_info(info);
    zmq::message_t message(bytes.data(), bytes.size());
    try {
      while (!impl_->socket->send(message, zmq::send_flags::none)) {
        if (stop_) throw ProducerStopped(where + ": stopped while the info message waited at the high-water mark");
      }
    } catch (const ProducerStopped& error) {
      fail(error.what());
      throw;
    }
  }
  return decision;
}

void Producer::send(std::uint32_t frame_number, std::uint32_t sector, const void* payload, std::size_t bytes,
                    ReleaseFn release, void* hint) {
  // Built only on error: this is the hot path.
  const auto where = [&] {
    return scan_text(scan_) + ", frame " + std::to_string(frame_number) + ", sector " + std::to_string(sector);
  };
  // Validation first: until it passes the caller keeps the buffer.
  if (!impl_->in_scan) throw ProducerError(where() + ": no scan is running; call begin_scan first");
  if (stop_) throw ProducerStopped(where() + ": the producer was stopped");
  if (sector != options_.receiver) {
    throw ProducerError(where() + ": this producer is receiver " + std::to_string(options_.receiver) +
                        " and sends sector " + std::to_string(options_.receiver) + " only");
  }
  if (bytes != options_.geometry.sector_bytes()) {
    throw ProducerError(where() + ": payload of " + std::to_string(bytes) + " bytes, expected " +
                        std::to_string(options_.geometry.sector_bytes()) + " (" +
                        std::to_string(options_.geometry.sector_rows) + " x " +
                        std::to_string(options_.geometry.sector_cols) + " pixels of " +
                        std::to_string(options_.geometry.itemsize) + " bytes)");
  }
  if (frame_number >= impl_->frames.size()) {
    throw ProducerError(where() + ": frame outside the " + std::to_string(impl_->request.scan_x) + " x " +
                        std::to_string(impl_->request.scan_y) + " scan");
  }
  if (impl_->frames[frame_number] != kAnnounced) {
    throw ProducerError(where() + (impl_->frames[frame_number] == kSent
                                     ? ": already sent in this scan"
                                     : ": not announced at scan start (not this thread's, or lost upstream)"));
  }

  protocol::DataHeader header;
  header.scan_number = impl_->request.scan_number;
  header.frame_number = frame_number;
  header.sector = sector;
  header.scan_x = impl_->request.scan_x;
  header.scan_y = impl_->request.scan_y;
  header.position_x = frame_number % header.scan_x;
  header.position_y = frame_number / header.scan_x;
  header.thread_id = options_.thread_id;

  if (impl_->decision.mode == Mode::kFallback) {
    try {
      impl_->writer->write(header, payload, bytes);
    } catch (...) {
      if (release != nullptr) release(const_cast<void*>(payload), hint);
      fail(where() + ": the raw file write failed");
      throw;
    }
    if (release != nullptr) release(const_cast<void*>(payload), hint);
  } else {
    const std::string encoded = protocol::encode_header(header);
    zmq::message_t head(encoded.data(), encoded.size());
    // From here ZeroMQ owns the payload: its destructor or I/O thread calls release exactly once.
    zmq::message_t body = release != nullptr ? zmq::message_t(const_cast<void*>(payload), bytes, release, hint)
                                             : zmq::message_t(payload, bytes);
    try {
      while (!impl_->socket->send(head, zmq::send_flags::sndmore)) {
        if (stop_) throw ProducerStopped(where() + ": stopped while waiting at the high-water mark");
      }
      // The rest of a multipart message is never held back by the high-water mark; the loop only
      // covers the contract of send().
      while (!impl_->socket->send(body, zmq::send_flags::none)) {
        if (stop_) throw ProducerStopped(where() + ": stopped in the middle of a message");
      }
    } catch (const ProducerStopped& error) {
      fail(error.what());
      throw;
    } catch (const zmq::error_t& error) {
      fail(where() + ": send failed: " + error.what());
      throw ProducerError(where() + ": send failed: " + error.what());
    }
  }
  impl_->frames[frame_number] = kSent;
  ++messages_;
  bytes_ += bytes;
  const auto now = std::chrono::steady_clock::now();
  if (now - impl_->last_status >= std::chrono::milliseconds(options_.status_interval_ms)) publish(impl_->state);
}

ScanResult Producer::end_scan() {
  const std::string where = scan_text(scan_) + ", producer " + options_.name();
  if (!impl_->in_scan) throw ProducerError(where + ": no scan is running");
  if (messages_ != impl_->decision.announced) {
    const std::string error = where + ": sent " + std::to_string(messages_) + " of the " +
                              std::to_string(impl_->decision.announced) + " messages announced at scan start";
    fail(error);
    throw ProducerError(error);
  }
  if (impl_->writer) {
    try {
      impl_->writer->close();
    } catch (const std::exception& error) {
      fail(error.what());
      throw;
    }
    impl_->writer.reset();
  }
  impl_->in_scan = false;
  impl_->frames.clear();
  impl_->frames.shrink_to_fit();
  ScanResult result;
  result.decision = impl_->decision;
  result.messages = messages_;
  result.bytes = bytes_;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->started).count();
  publish(protocol::ServiceState::kFinished);
  return result;
}

void Producer::report_error(std::uint32_t scan_number, const std::string& error) {
  if (impl_->in_scan) {
    throw ProducerError("scan " + std::to_string(scan_) + ", producer " + options_.name() +
                        ": a scan is running; its own errors are reported");
  }
  scan_ = scan_number;
  messages_ = 0;
  bytes_ = 0;
  publish(protocol::ServiceState::kError, error);
}

ScanResult Producer::run_scan(const ScanRequest& request, SectorSource& source, SiblingGate* gate) {
  const std::vector<std::uint32_t> frames = source.frames();
  try {
    begin_scan(request, frames);
  } catch (...) {
    if (gate != nullptr) gate->finish(options_.thread_id);  // its siblings must not wait for it
    throw;
  }
  return stream(source, frames, gate);
}

ScanResult Producer::stream(SectorSource& source, const std::vector<std::uint32_t>& frames, SiblingGate* gate) {
  // However this ends (done, failed, stopped), the siblings stop waiting for this thread.
  struct Finish {
    SiblingGate* gate;
    std::uint32_t thread_id;
    ~Finish() {
      if (gate != nullptr) gate->finish(thread_id);
    }
  } finish{gate, options_.thread_id};
  const std::uint32_t scan_number = scan_;
  if (!impl_->in_scan) throw ProducerError("producer " + options_.name() + ": stream() needs begin_scan() first");
  detail::BufferPool& pool = impl_->pool;
  const std::size_t bytes = pool.buffer_bytes();
  for (const std::uint32_t frame : frames) {
    if (gate != nullptr && !gate->wait(options_.thread_id, frame, stop_, kStopCheckMs)) {
      const std::string where = scan_text(scan_number) + ", producer " + options_.name();
      fail(where + ": stopped while waiting for a sibling thread");
      throw ProducerStopped(where + ": stopped while waiting for a sibling thread");
    }
    unsigned char* buffer = pool.take();
    try {
      source.read(frame, buffer, bytes);
    } catch (const std::exception& error) {
      pool.give_back(buffer);
      fail(scan_text(scan_number) + ", frame " + std::to_string(frame) + ": " + error.what());
      throw;
    }
    try {
      send(frame, options_.receiver, buffer, bytes, &detail::BufferPool::release, &pool);
    } catch (const ProducerStopped&) {
      throw;  // send took the buffer and published the error
    } catch (const ProducerError& error) {
      if (impl_->in_scan) {  // a validation error: the buffer is still ours
        pool.give_back(buffer);
        fail(error.what());
      }
      throw;
    }
  }
  return end_scan();
}

}  // namespace sectorflow::producer
