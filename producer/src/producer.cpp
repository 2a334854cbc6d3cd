#include "sectorflow/producer/producer.hpp"

#include <algorithm>
#include <exception>
#include <iostream>
#include <utility>

#include <unistd.h>

#include <zmq.hpp>

#include "buffer_pool.hpp"
#include "sectorflow/protocol/bad_entries.hpp"
#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/producer/errors.hpp"
#include "sectorflow/producer/routing.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/info_message.hpp"
#include "sectorflow/protocol/native_header.hpp"
#include "sectorflow/protocol/raw_file.hpp"
#include "sectorflow/protocol/scan_records.hpp"
#include "sectorflow/protocol/text.hpp"

namespace sectorflow::producer {
namespace {

enum FrameState : std::uint8_t { kNotAnnounced = 0, kAnnounced = 1, kSent = 2 };

std::string scan_text(std::uint32_t scan) { return "scan " + std::to_string(scan); }

// Positions p < n_frames with p % threads == thread, counted without listing them.
std::uint64_t owned_frames(std::uint64_t n_frames, std::uint32_t threads, std::uint32_t thread) {
  return n_frames / threads + (thread < n_frames % threads ? 1 : 0);
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

}  // namespace

const char* to_string(Mode mode) { return mode == Mode::kStreaming ? "streaming" : "fallback"; }

const char* to_string(Wire wire) {
  switch (wire) {
    case Wire::kSectorflow:
      return "sectorflow";
    case Wire::kNative:
      return "native";
    case Wire::kUnset:
      break;
  }
  return "";
}

void check_first_frame(const std::string& where, std::uint32_t first_frame, std::uint64_t positions) {
  if (positions != 0 && std::uint64_t{first_frame} + positions - 1 > std::uint64_t{0xFFFFFFFF}) {
    throw ProducerError(where + ": first frame " + std::to_string(first_frame) + " + " + std::to_string(positions) +
                        " positions - 1 exceeds the largest frame number, 2^32 - 1");
  }
}

Wire parse_wire(const std::string& text) {
  if (text == "sectorflow") return Wire::kSectorflow;
  if (text == "native") return Wire::kNative;
  throw ProducerError("wire '" + text + "': expected 'sectorflow' or 'native' ([[receivers]] wire)");
}

struct Producer::Impl {
  // Declared first so it is destroyed last: the context's termination releases queued messages,
  // whose buffers return to the pool.
  detail::BufferPool pool;
  zmq::context_t context{1};
  std::vector<zmq::socket_t> sockets;  ///< one per member of the aggregation tier; frame f to f % size()

  bool in_scan = false;
  protocol::ServiceState state = protocol::ServiceState::kIdle;
  ScanRequest request;
  ScanDecision decision;
  std::vector<std::uint8_t> frames;  ///< FrameState per position of the scan
  std::optional<protocol::RawFileWriter> writer;  ///< the fallback file, or the spill file once spilling
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point last_status;
  protocol::BadEntries bad_entries;  ///< registrations skipped when routing from the replica

  // What became of the scan's sectors (the scan record).
  std::uint64_t sent = 0;
  std::uint64_t spilled = 0;    ///< records handed to the writer; once it is closed, records in the file
  std::string spill_file;
  bool partial = false;
  // What the thread sent and spilled in its earlier scans: with this scan's, the status's *_total
  // fields, which only grow (Prometheus counters), while messages, bytes and spilled are this scan's.
  struct Totals {
    std::uint64_t messages = 0, bytes = 0, spilled = 0;
    void add(std::uint64_t scan_messages, std::uint64_t scan_bytes, std::uint64_t scan_spilled) {
      messages += scan_messages;
      bytes += scan_bytes;
      spilled += scan_spilled;
    }
  } earlier;
  /// Per tier member: streaming through it gave up for the rest of the scan (send timeout).
  std::vector<std::uint8_t> spilling;
  /// Per tier member: the data messages announced to it (a native header's num_frames_this_thread).
  std::vector<std::uint64_t> announced_to;
  /// Per tier member: the data messages sent to it (the scan record's tier_sent, with a tier).
  std::vector<std::uint64_t> sent_to;
  protocol::ProducerScanRecord record;

  // NodeGroups the tier's relay threads of this receiver declared dead for this scan
  // (scans/<n>/aggregator/t<m * receivers + R>, one per member m): a NodeGroup dead at one member
  // may still be reached through the others, so each member's stream spills its own dead ones.
  std::vector<std::string> relay_keys;   ///< per member
  std::int64_t relay_sequence = -1;      ///< the replica's sequence when the relay records were last read
  std::vector<std::string> relay_bytes;  ///< per member: the relay record last decoded
  std::vector<std::uint8_t> dead;        ///< per member m and routing index g, at m * routing.size() + g
  bool any_dead = false;

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
  if (options_.wire != Wire::kSectorflow && options_.wire != Wire::kNative) {
    throw ProducerError("producer " + options_.name() +
                        ": wire not set; expected sectorflow or native ([[receivers]] wire)");
  }
  if (options_.send_hwm < 1) {
    throw ProducerError("producer " + options_.name() + ": send_hwm " + std::to_string(options_.send_hwm) +
                        " must be at least 1 (producer.send_hwm)");
  }
  if (!(options_.status_ttl_s >= 0.0)) {
    throw ProducerError("producer " + options_.name() + ": status_ttl_s " + std::to_string(options_.status_ttl_s) +
                        " must be set, at least 0 (kvstore.ttl_s)");
  }
  if (!(options_.scan_record_ttl_s > 0.0)) {
    throw ProducerError("producer " + options_.name() + ": scan_record_ttl_s " +
                        std::to_string(options_.scan_record_ttl_s) + " must be set, above 0 (kvstore.scan_record_ttl_s)");
  }
  if (options_.send_timeout_ms < 1) {
    throw ProducerError("producer " + options_.name() + ": send_timeout_ms " + std::to_string(options_.send_timeout_ms) +
                        " must be at least 1 (producer.send_timeout_ms)");
  }
  if (options_.aggregator_endpoints.size() > protocol::kMaxTier) {
    throw ProducerError("producer " + options_.name() + ": " + std::to_string(options_.aggregator_endpoints.size()) +
                        " aggregators in the tier, at most " + std::to_string(protocol::kMaxTier));
  }
  if (!options_.standby_endpoints.empty() && options_.standby_endpoints.size() != options_.aggregator_endpoints.size()) {
    throw ProducerError("producer " + options_.name() + ": " + std::to_string(options_.standby_endpoints.size()) +
                        " standby endpoints for " + std::to_string(options_.aggregator_endpoints.size()) + " aggregators");
  }
  impl_ = std::make_unique<Impl>(options_.geometry.sector_bytes());
  if (!options_.aggregator_keys.empty() && options_.aggregator_keys.size() != options_.aggregator_endpoints.size()) {
    throw ProducerError("producer " + options_.name() + ": " + std::to_string(options_.aggregator_keys.size()) +
                        " aggregator keys for " + std::to_string(options_.aggregator_endpoints.size()) + " aggregators");
  }
  for (const std::string& member : options_.aggregator_endpoints) {
    const std::size_t index = impl_->sockets.size();
    security::CurveClient curve = options_.curve;
    if (!options_.aggregator_keys.empty()) curve.server_key = options_.aggregator_keys[index];
    const std::string standby_endpoint = options_.standby_endpoints.empty() ? std::string{} : options_.standby_endpoints[index];
    zmq::socket_t socket(impl_->context, zmq::socket_type::push);
    socket.set(zmq::sockopt::sndhwm, options_.send_hwm);
    socket.set(zmq::sockopt::sndtimeo, kStopCheckMs);  // only to notice stop(); sends are retried
    socket.set(zmq::sockopt::linger, options_.linger_ms);
    const bool standby = !standby_endpoint.empty() && standby_endpoint != member;
    // Without it a PUSH round-robins onto the pipe of the peer that is not bound (the standby) and its
    // messages wait there until that peer binds, if ever.
    if (standby) socket.set(zmq::sockopt::immediate, 1);
    std::string endpoint = member;
    try {
      security::apply(socket, curve);
      socket.connect(endpoint);
      if (standby) {
        endpoint = standby_endpoint;
        socket.connect(endpoint);
      }
    } catch (const std::exception& error) {  // zmq::error_t, or a CURVE key that is not Z85
      throw ProducerError("producer " + options_.name() + ": cannot connect to aggregator endpoint '" + endpoint +
                          "': " + error.what());
    }
    impl_->sockets.push_back(std::move(socket));
  }
  publish(protocol::ServiceState::kIdle);
}

Producer::~Producer() = default;

void Producer::stop() { stop_.store(true); }

void Producer::abort_scan(std::uint32_t scan_number) { aborted_scan_.store(std::int64_t{scan_number}); }

std::string Producer::halt_reason() const {
  return stop_.load() ? "the producer was stopped" : "the scan was aborted (sectorflow abort)";
}

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
  // Who runs it: a second daemon for the receiver names this one and refuses to start (sectorflow/ownership.py).
  status.extra["host"] = host_name();
  status.extra["pid"] = std::int64_t{::getpid()};
  status.extra["messages_total"] = static_cast<std::int64_t>(impl_->earlier.messages + messages_);
  status.extra["bytes_total"] = static_cast<std::int64_t>(impl_->earlier.bytes + bytes_);
  status.extra["spilled_total"] = static_cast<std::int64_t>(impl_->earlier.spilled + impl_->spilled);
  if (state != protocol::ServiceState::kIdle || scan_ != 0) {
    status.extra["mode"] = std::string(to_string(impl_->decision.mode));
    status.extra["nodegroups"] = static_cast<std::int64_t>(impl_->decision.routing.size());
    status.extra["announced"] = static_cast<std::int64_t>(impl_->decision.announced);
    if (impl_->decision.mode == Mode::kFallback) status.extra["fallback_dir"] = options_.fallback_dir;
    if (impl_->spilled != 0) status.extra["spilled"] = static_cast<std::int64_t>(impl_->spilled);
  }
  if (!error.empty()) status.extra["error"] = error;
  if (const std::uint64_t bad = impl_->bad_entries.count(); bad != 0) {
    status.extra["bad_records"] = static_cast<std::int64_t>(bad);
  }
  kvstore_->set(protocol::status_key(protocol::kServiceProducer, options_.name()), status.encode(),
                options_.status_ttl_s);
}

void Producer::write_record(protocol::ServiceState state, const std::string& error) {
  protocol::ProducerScanRecord& record = impl_->record;
  record.receiver = options_.receiver;
  record.thread = options_.thread_id;
  record.state = std::string(protocol::to_string(state));
  record.routing = impl_->decision.routing;
  record.counts = impl_->decision.counts;
  record.tier_counts = impl_->decision.tier_counts;
  record.tier_sent = impl_->sockets.size() > 1 ? impl_->sent_to : std::vector<std::uint64_t>{};
  record.owned = impl_->decision.owned;
  record.lost_upstream = impl_->decision.lost_upstream;
  record.sent = impl_->sent;
  record.spilled = impl_->spilled;
  record.spill_file = impl_->spill_file;
  record.partial = impl_->partial;
  record.error = std::string(protocol::cut_text(error, protocol::kMaxTextBytes));
  record.updated_s = protocol::wall_clock_s();
  if (kvstore_ == nullptr) return;
  // Without an owner: the record outlives this process, which the accounting needs most when it died.
  kvstore_->set_once(protocol::scan_producer_key(scan_, options_.receiver, options_.thread_id), record.encode(),
                     options_.scan_record_ttl_s);
}

protocol::ProducerScanRecord Producer::record() const { return impl_->record; }

void Producer::warn(const std::string& line) const {
  if (options_.warn) {
    try {
      options_.warn(line);
      return;
    } catch (const std::exception&) {
      // A logger that fails must not fail the scan; the line still goes out below.
    }
  }
  std::cerr << "warning: " << line << std::endl;
}

void Producer::fail(const std::string& error) {
  impl_->in_scan = false;
  if (impl_->writer) {
    // However the thread failed, its raw file is not whole: it keeps a name that says so.
    impl_->spill_file = impl_->writer->abandon();
    impl_->spilled = impl_->writer->records_in_file();
    impl_->partial = !impl_->spill_file.empty();
    impl_->writer.reset();
  }
  try {
    publish(protocol::ServiceState::kError, error);
    write_record(protocol::ServiceState::kError, error);
  } catch (const std::exception&) {
    // The original failure is what the caller must see.
  }
}

void Producer::open_spill_file() {
  if (impl_->writer) return;
  if (options_.fallback_dir.empty()) {
    throw ProducerError(scan_text(scan_) + ", producer " + options_.name() +
                        ": no fallback directory to spill to (producer.fallback_dir)");
  }
  impl_->writer.emplace(options_.fallback_dir, scan_, options_.receiver, options_.thread_id, options_.geometry);
  impl_->spill_file = impl_->writer->path();
}

void Producer::start_spilling(const std::string& why, std::size_t member) {
  impl_->spilling[member] = 1;
  open_spill_file();
  const bool alone = impl_->decision.tier.size() <= 1;
  warn(scan_text(scan_) + ", producer " + options_.name() + ": " + why + "; spilling the remaining " +
       (alone ? std::to_string(impl_->decision.announced - messages_) + " sectors of the scan"
              : std::string("sectors of the scan that go through it (the other aggregators' stream on)")) +
       " to " + impl_->spill_file);
  publish(protocol::ServiceState::kWritingToDisk);
  write_record(protocol::ServiceState::kWritingToDisk);
}

void Producer::spill(const protocol::DataHeader& header, const void* payload, std::size_t bytes, ReleaseFn release,
                     void* hint) {
  try {
    open_spill_file();
    impl_->writer->write(header, payload, bytes);
  } catch (const std::exception& error) {
    if (release != nullptr) release(const_cast<void*>(payload), hint);
    fail(header.where() + ": the raw file write failed: " + error.what());
    throw;
  }
  if (release != nullptr) release(const_cast<void*>(payload), hint);
  ++impl_->spilled;
}

bool Producer::routed_to_dead(std::uint32_t frame_number) {
  const std::vector<std::string>& routing = impl_->decision.routing;
  if (kvstore_ == nullptr || routing.empty()) return false;
  // Reading the replica's sequence is cheap; the relay records are read only when something changed.
  const std::int64_t sequence = kvstore_->sequence();
  if (sequence != impl_->relay_sequence) {
    impl_->relay_sequence = sequence;
    for (std::size_t member = 0; member < impl_->relay_keys.size(); ++member) note_dead(member);
  }
  const std::size_t member = member_of(frame_number);
  return impl_->any_dead && impl_->dead[member * routing.size() + frame_number % routing.size()] != 0;
}

void Producer::note_dead(std::size_t member) {
  const std::vector<std::string>& routing = impl_->decision.routing;
  const std::string& key = impl_->relay_keys[member];
  std::optional<std::string> raw = kvstore_->get(key);
  if (!raw || *raw == impl_->relay_bytes[member]) return;
  impl_->relay_bytes[member] = std::move(*raw);
  std::vector<std::string> newly;
  try {
    for (const std::string& uid : protocol::RelayScanRecord::decode(impl_->relay_bytes[member]).dead) {
      const auto it = std::lower_bound(routing.begin(), routing.end(), uid);
      if (it == routing.end() || *it != uid) continue;  // not of this scan's routing
      std::uint8_t& dead = impl_->dead[member * routing.size() + static_cast<std::size_t>(it - routing.begin())];
      if (dead == 0) newly.push_back(uid);
      dead = 1;
    }
  } catch (const std::exception& error) {
    // A record that does not decode declares nobody dead: streaming goes on as before, and the
    // record is logged once and counted in the status (bad_records), as a bad registration is.
    for (const auto& [bad_key, why] : impl_->bad_entries.note(key, {{key, error.what()}})) {
      warn(scan_text(scan_) + ", producer " + options_.name() + ": skipped " + bad_key +
           ", which does not decode: " + why);
    }
  }
  if (newly.empty()) return;
  impl_->any_dead = true;
  std::string uids;
  for (const std::string& uid : newly) uids += (uids.empty() ? "" : ", ") + uid;
  warn(scan_text(scan_) + ", producer " + options_.name() + ": relay thread " +
       std::to_string(member * options_.geometry.n_sectors() + options_.receiver) + " declared NodeGroup " + uids +
       " dead; spilling its sectors to a raw file in " + options_.fallback_dir);
  write_record(impl_->state);
}

ScanDecision Producer::begin_scan(const ScanRequest& request, const std::vector<std::uint32_t>& positions) {
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
  check_first_frame(where, request.first_frame, n_frames);
  std::vector<std::uint8_t> state(n_frames, kNotAnnounced);
  for (const std::uint32_t position : positions) {
    if (position >= n_frames) {
      throw ProducerError(where + ": position " + std::to_string(position) + " is outside the " +
                          std::to_string(request.scan_x) + " x " + std::to_string(request.scan_y) + " scan");
    }
    if (position % options_.threads != options_.thread_id) {
      throw ProducerError(where + ": position " + std::to_string(position) + " belongs to thread " +
                          std::to_string(position % options_.threads) + " (position % " +
                          std::to_string(options_.threads) + "), not to thread " + std::to_string(options_.thread_id));
    }
    if (state[position] != kNotAnnounced) {
      throw ProducerError(where + ": position " + std::to_string(position) + " is listed twice");
    }
    state[position] = kAnnounced;
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
  decision.announced = positions.size();
  decision.owned = owned_frames(n_frames, options_.threads, options_.thread_id);
  decision.lost_upstream = decision.owned - decision.announced;

  std::optional<protocol::RawFileWriter> writer;
  if (decision.mode == Mode::kStreaming) {
    if (impl_->sockets.empty()) {
      throw ProducerError(where + ": NodeGroups are registered but the producer has no aggregator endpoint");
    }
    decision.counts = count_routes(decision.routing, positions, request.first_frame);
    const auto members = static_cast<std::uint32_t>(impl_->sockets.size());
    decision.tier = request.tier;
    if (decision.tier.empty()) {
      for (std::uint32_t member = 0; member < members; ++member) decision.tier.push_back(member);
    }
    try {
      protocol::check_tier(where + ": tier", decision.tier);
    } catch (const protocol::ProtocolError& error) {
      throw ProducerError(error.what());
    }
    if (decision.tier.back() >= members) {
      throw ProducerError(where + ": tier member " + std::to_string(decision.tier.back()) + " is not one of the " +
                          std::to_string(members) + " aggregators configured ([aggregator] tier)");
    }
    if (members > 1) {
      decision.tier_counts = count_tier_routes(decision.routing, members, decision.tier, positions, request.first_frame);
    }
  } else {
    if (options_.fallback_dir.empty()) {
      throw ProducerError(where + ": no NodeGroup registered and no fallback directory (producer.fallback_dir)");
    }
    writer.emplace(options_.fallback_dir, request.scan_number, options_.receiver, options_.thread_id,
                   options_.geometry);
    decision.file = writer->path();
  }

  impl_->request = request;
  impl_->decision = decision;
  impl_->frames = std::move(state);
  impl_->writer = std::move(writer);
  impl_->in_scan = true;
  impl_->started = std::chrono::steady_clock::now();
  impl_->earlier.add(messages_, bytes_, impl_->spilled);
  impl_->sent = 0;
  impl_->spilled = 0;
  impl_->spill_file = decision.file;
  impl_->partial = false;
  impl_->spilling.assign(impl_->sockets.size(), 0);
  impl_->announced_to.assign(impl_->sockets.size(), 0);
  impl_->sent_to.assign(impl_->sockets.size(), 0);
  if (decision.tier_counts.empty()) {
    impl_->announced_to[0] = decision.announced;
  } else {
    for (std::size_t i = 0; i < decision.tier_counts.size(); ++i) {
      impl_->announced_to[i / decision.routing.size()] += decision.tier_counts[i];
    }
  }
  impl_->relay_keys.clear();
  for (std::size_t member = 0; member < impl_->sockets.size(); ++member) {
    impl_->relay_keys.push_back(protocol::scan_relay_key(
        request.scan_number, static_cast<std::uint32_t>(member * options_.geometry.n_sectors() + options_.receiver)));
  }
  impl_->relay_sequence = -1;
  impl_->relay_bytes.assign(impl_->sockets.size(), std::string());
  impl_->dead.assign(impl_->sockets.size() * decision.routing.size(), 0);
  impl_->any_dead = false;
  scan_ = request.scan_number;
  messages_ = 0;
  bytes_ = 0;
  const protocol::ServiceState working =
      decision.mode == Mode::kStreaming ? protocol::ServiceState::kStreaming : protocol::ServiceState::kWritingToDisk;
  // The record goes before the info message: a restarted aggregator recovers the scan's routing and
  // counts from it.
  try {
    write_record(working);
    publish(working);
  } catch (const std::exception& error) {  // the kvstore client refused: the scan must not stay half begun
    fail(where + ": " + error.what());
    throw;
  }

  // A native receiver announces its messages in every data header instead.
  if (decision.mode == Mode::kStreaming && options_.wire == Wire::kSectorflow) {
    for (const std::uint32_t member : decision.tier) send_info(member);
  }
  return decision;
}

std::size_t Producer::member_of(std::uint32_t frame_number) const {
  const std::vector<std::uint32_t>& tier = impl_->decision.tier;
  return tier.empty() ? 0 : tier[frame_number % tier.size()];
}

void Producer::send_info(std::size_t member) {
  const ScanRequest& request = impl_->request;
  const ScanDecision& decision = impl_->decision;
  const std::string where = scan_text(request.scan_number) + ", producer " + options_.name();
  std::map<std::string, std::uint64_t> counts = decision.counts;
  if (!decision.tier_counts.empty()) {
    for (std::size_t g = 0; g < decision.routing.size(); ++g) {
      counts[decision.routing[g]] = decision.tier_counts[member * decision.routing.size() + g];
    }
  }
  protocol::InfoMessage info{request.scan_number, options_.receiver, options_.thread_id, request.scan_x,
                             request.scan_y, decision.routing, std::move(counts)};
  const std::string bytes = protocol::encode_info(info);
  zmq::message_t message(bytes.data(), bytes.size());
  const auto blocked_since = std::chrono::steady_clock::now();
  try {
    while (!impl_->sockets[member].send(message, zmq::send_flags::none)) {
      if (halted()) throw ProducerStopped(where + ": " + halt_reason() + " while the info message waited at the high-water mark");
      if (std::chrono::steady_clock::now() - blocked_since >= std::chrono::milliseconds(options_.send_timeout_ms)) {
        start_spilling("the aggregator took no info message for " + std::to_string(options_.send_timeout_ms) +
                       " ms (producer.send_timeout_ms) at " + options_.aggregator_endpoints[member], member);
        break;
      }
    }
  } catch (const ProducerStopped& error) {
    fail(error.what());
    throw;
  } catch (const std::exception& error) {  // the spill file cannot be created, the socket failed
    fail(where + ": " + error.what());
    throw ProducerError(where + ": " + error.what());
  }
}

void Producer::send(std::uint32_t frame_number, std::uint32_t sector, const void* payload, std::size_t bytes,
                    ReleaseFn release, void* hint) {
  // Built only on error: this is the hot path.
  const auto where = [&] {
    return scan_text(scan_) + ", frame " + std::to_string(frame_number) + ", sector " + std::to_string(sector);
  };
  // Validation first: until it passes the caller keeps the buffer.
  if (!impl_->in_scan) throw ProducerError(where() + ": no scan is running; call begin_scan first");
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
  const std::uint32_t first_frame = impl_->request.first_frame;
  const std::uint32_t position = frame_number - first_frame;  // meaningful once frame_number >= first_frame
  if (frame_number < first_frame || position >= impl_->frames.size()) {
    throw ProducerError(where() + ": frame outside the " + std::to_string(impl_->request.scan_x) + " x " +
                        std::to_string(impl_->request.scan_y) + " scan, whose frame numbers are " +
                        std::to_string(first_frame) + " to " +
                        std::to_string(std::uint64_t{first_frame} + impl_->frames.size() - 1));
  }
  if (impl_->frames[position] != kAnnounced) {
    throw ProducerError(where() + (impl_->frames[position] == kSent
                                     ? ": already sent in this scan"
                                     : ": not announced at scan start (not this thread's, or lost upstream)"));
  }
  // Accepted: from here the payload is released on every path (ZeroMQ, the raw file, or here).
  if (halted()) {
    if (release != nullptr) release(const_cast<void*>(payload), hint);
    fail(where() + ": " + halt_reason());
    throw ProducerStopped(where() + ": " + halt_reason());
  }

  protocol::DataHeader header;
  header.scan_number = impl_->request.scan_number;
  header.frame_number = frame_number;
  header.sector = sector;
  header.scan_x = impl_->request.scan_x;
  header.scan_y = impl_->request.scan_y;
  header.position_x = position % header.scan_x;
  header.position_y = position / header.scan_x;
  header.thread_id = options_.thread_id;

  const std::size_t member = impl_->decision.mode == Mode::kFallback ? 0 : member_of(frame_number);
  bool spilled = impl_->decision.mode == Mode::kFallback || impl_->spilling[member] != 0 || routed_to_dead(frame_number);
  if (!spilled) {
    // A native header announces the thread's message count for the scan through this member of the
    // tier, spilled ones included.
    const std::string encoded =
        options_.wire == Wire::kNative
            ? protocol::encode_native_header(
                  protocol::to_native_header(header, static_cast<std::uint32_t>(impl_->announced_to[member])))
            : protocol::encode_header(header);
    zmq::message_t head(encoded.data(), encoded.size());
    zmq::socket_t& socket = impl_->sockets[member];
    const auto blocked_since = std::chrono::steady_clock::now();
    try {
      while (!socket.send(head, zmq::send_flags::sndmore)) {
        if (halted()) {
          if (release != nullptr) release(const_cast<void*>(payload), hint);
          throw ProducerStopped(where() + ": " + halt_reason() + " while waiting at the high-water mark");
        }
        // The NodeGroup this sector waits for may have been declared dead meanwhile: the sector
        // goes to disk, and the live NodeGroups' sectors behind it move on.
        if (routed_to_dead(frame_number)) {
          spilled = true;
          break;
        }
        if (std::chrono::steady_clock::now() - blocked_since >= std::chrono::milliseconds(options_.send_timeout_ms)) {
          start_spilling("the aggregator took nothing for " + std::to_string(options_.send_timeout_ms) +
                         " ms (producer.send_timeout_ms) at " + options_.aggregator_endpoints[member], member);
          spilled = true;
          break;
        }
      }
    } catch (const ProducerStopped& error) {
      fail(error.what());
      throw;
    } catch (const std::exception& error) {  // the socket failed, or the spill file cannot be created
      if (release != nullptr) release(const_cast<void*>(payload), hint);
      fail(where() + ": " + error.what());
      throw ProducerError(where() + ": " + error.what());
    }
    if (!spilled) {
      // The head is queued: from here ZeroMQ owns the payload, its destructor or I/O thread calls
      // release exactly once.
      zmq::message_t body = release != nullptr ? zmq::message_t(const_cast<void*>(payload), bytes, release, hint)
                                               : zmq::message_t(payload, bytes);
      try {
        // The rest of a multipart message is never held back by the high-water mark; the loop only
        // covers the contract of send().
        while (!socket.send(body, zmq::send_flags::none)) {
          if (stop_) throw ProducerStopped(where() + ": stopped in the middle of a message");
        }
      } catch (const ProducerStopped& error) {
        fail(error.what());
        throw;
      } catch (const zmq::error_t& error) {
        fail(where() + ": send failed: " + error.what());
        throw ProducerError(where() + ": send failed: " + error.what());
      }
      ++impl_->sent;
      ++impl_->sent_to[member];
    }
  }
  if (spilled) spill(header, payload, bytes, release, hint);
  impl_->frames[position] = kSent;
  ++messages_;
  bytes_ += bytes;
  const auto now = std::chrono::steady_clock::now();
  if (now - impl_->last_status >= std::chrono::milliseconds(options_.status_interval_ms)) {
    // The scan's progress, at the status's pace: the record is what `acquire --wait`, `status` and
    // the dashboard account the running scan from. Both keys are overwritten, never added to.
    write_record(impl_->state);
    publish(impl_->state);
  }
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
      fail(error.what());  // the file is renamed .partial; fail() records it
      throw;
    }
    impl_->spilled = impl_->writer->records_in_file();
    impl_->spill_file = impl_->writer->current_path();
    impl_->writer.reset();
  }
  impl_->in_scan = false;
  impl_->frames.clear();
  impl_->frames.shrink_to_fit();
  ScanResult result;
  result.decision = impl_->decision;
  result.messages = messages_;
  result.bytes = bytes_;
  result.sent = impl_->sent;
  result.spilled = impl_->spilled;
  result.spill_file = impl_->spill_file;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->started).count();
  write_record(protocol::ServiceState::kFinished);
  publish(protocol::ServiceState::kFinished);
  return result;
}

void Producer::report_error(std::uint32_t scan_number, const std::string& error, std::uint32_t scan_x,
                            std::uint32_t scan_y) {
  if (impl_->in_scan) {
    throw ProducerError("scan " + std::to_string(scan_) + ", producer " + options_.name() +
                        ": a scan is running; its own errors are reported");
  }
  scan_ = scan_number;
  impl_->earlier.add(messages_, bytes_, impl_->spilled);
  messages_ = 0;
  bytes_ = 0;
  impl_->decision = ScanDecision{};
  impl_->decision.scan_number = scan_number;
  impl_->decision.owned = owned_frames(std::uint64_t{scan_x} * scan_y, options_.threads, options_.thread_id);
  impl_->sent = 0;
  impl_->spilled = 0;
  impl_->spill_file.clear();
  impl_->partial = false;
  write_record(protocol::ServiceState::kError, error);
  publish(protocol::ServiceState::kError, error);
}

ScanResult Producer::run_scan(const ScanRequest& request, SectorSource& source, SiblingGate* gate) {
  const std::vector<std::uint32_t> positions = source.frames();
  try {
    begin_scan(request, positions);
  } catch (...) {
    if (gate != nullptr) gate->finish(options_.thread_id);  // its siblings must not wait for it
    throw;
  }
  return stream(source, positions, gate);
}

ScanResult Producer::stream(SectorSource& source, const std::vector<std::uint32_t>& positions, SiblingGate* gate) {
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
  const std::uint32_t first_frame = impl_->request.first_frame;
  for (const std::uint32_t position : positions) {
    if (gate != nullptr && !gate->wait(options_.thread_id, position, stop_, kStopCheckMs)) {
      const std::string where = scan_text(scan_number) + ", producer " + options_.name();
      fail(where + ": stopped while waiting for a sibling thread");
      throw ProducerStopped(where + ": stopped while waiting for a sibling thread");
    }
    unsigned char* buffer = pool.take();
    // begin_scan checked that every frame number first_frame + position fits.
    const std::uint32_t frame = first_frame + position;
    try {
      source.read(position, buffer, bytes);
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
