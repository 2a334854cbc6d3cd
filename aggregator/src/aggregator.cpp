#include "sectorflow/aggregator/aggregator.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <zmq.hpp>

#include "directory.hpp"
#include "native_routes.hpp"
#include "record_store.hpp"
#include "relay.hpp"
#include "sectorflow/aggregator/errors.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/limits.hpp"
#include "sectorflow/protocol/worker_thread.hpp"
#include "sectorflow/security/zap_handler.hpp"

namespace sectorflow::aggregator {

struct Aggregator::Impl {
  AggregatorOptions options;
  zmq::context_t context;
  // Before any socket: without a handler libzmq lets every CURVE peer in.
  std::optional<security::ZapHandler> zap;
  std::vector<std::string> endpoints;
  std::vector<std::unique_ptr<RelayCounters>> counters;
  std::vector<std::unique_ptr<detail::Relay>> relays;
  std::unique_ptr<detail::Directory> directory;
  std::unique_ptr<detail::RecordStore> records;
  std::unique_ptr<detail::NativeRoutes> native_routes;
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  bool started = false;
  bool stopped = false;
  mutable std::mutex mutex;  // summaries, failure
  std::deque<ScanSummary> summaries;
  std::string failure;
};

namespace {

// What no one key of the configuration says; each key's range is the schema's, checked when the
// file is loaded (configs/schema.py).
void check(const AggregatorOptions& o) {
  if (o.producer_threads.empty()) {
    throw AggregatorError("aggregator: no receivers; list them as [[receivers]] in the configuration");
  }
  if (o.members == 0 || o.members > protocol::kMaxTier || o.member >= o.members) {
    throw AggregatorError("aggregator: member " + std::to_string(o.member) + " of a tier of " +
                          std::to_string(o.members) + "; expected a member below the tier's size, 1.." +
                          std::to_string(protocol::kMaxTier) + " ([aggregator] tier, --member)");
  }
  if (o.base_port == 0 ||
      std::size_t{o.base_port} + (std::size_t{o.member} + 1) * o.producer_threads.size() - 1 > 65535) {
    throw AggregatorError("aggregator: base_port " + std::to_string(o.base_port) + " with " +
                          std::to_string(o.producer_threads.size()) + " threads of tier member " +
                          std::to_string(o.member) + " leaves the port range 1..65535");
  }
  if (o.wire.size() != o.producer_threads.size()) {
    throw AggregatorError("aggregator: " + std::to_string(o.wire.size()) + " wire dialects for " +
                          std::to_string(o.producer_threads.size()) + " receivers ([[receivers]] wire)");
  }
  try {
    o.geometry.validate();
  } catch (const protocol::ProtocolError& error) {
    throw AggregatorError(std::string("aggregator: ") + error.what());
  }
  if (o.geometry.n_sectors() != o.producer_threads.size()) {
    throw AggregatorError("aggregator: " + std::to_string(o.producer_threads.size()) + " receivers for " +
                          std::to_string(o.geometry.n_sectors()) + " sectors; give one [[receivers]] per sector");
  }
}

// [aggregator] native_scan_idle_s to the nearest millisecond (ties to even), at least one.
std::chrono::milliseconds native_idle(double seconds) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::round<std::chrono::milliseconds>(std::chrono::duration<double>(seconds)));
}

}  // namespace

Aggregator::Aggregator(AggregatorOptions options) : impl_(std::make_unique<Impl>()) {
  check(options);
  Impl& impl = *impl_;
  impl.options = std::move(options);
  const std::size_t n = impl.options.producer_threads.size();
  // One ZeroMQ I/O thread per relay thread plus one (set before the first socket, as libzmq
  // requires): with one I/O thread for all, every relay thread's receiving and sending connections
  // wait on the same thread; with CURVE the I/O threads also encrypt and decrypt every message.
  // Measured (BENCHMARKS.md, 2026-11-24): (c) at the real geometry 0.40 -> 0.45 and 0.48 -> 0.56 of
  // the raw hop in two A/B pairs, the aggregator's CPU per GB 0.64-0.74 -> 0.47-0.59.
  impl.context.set(zmq::ctxopt::io_threads, static_cast<int>(n + 1));
  const bool curve = impl.options.producers_curve.enabled() || impl.options.nodegroups_curve.enabled();
  std::vector<zmq::socket_t> pulls;
  std::vector<zmq::socket_t*> watched;
  pulls.reserve(n);
  for (std::size_t r = 0; r < n; ++r) {
    zmq::socket_t& pull = pulls.emplace_back(impl.context, zmq::socket_type::pull);
    pull.set(zmq::sockopt::rcvhwm, impl.options.hwm);
    // A producer sending a larger frame than a sector or an info message is cut off by ZeroMQ
    // before the frame is buffered.
    pull.set(zmq::sockopt::maxmsgsize, protocol::max_frame_bytes(impl.options.geometry));
    pull.set(zmq::sockopt::linger, 0);
    if (impl.options.producers_curve.enabled()) watched.push_back(&pull);
  }
  if (curve) {
    impl.zap.emplace(impl.context,
                     std::vector<security::CurveServer>{impl.options.producers_curve, impl.options.nodegroups_curve},
                     watched);
  }
  for (std::size_t r = 0; r < n; ++r) {
    const std::string endpoint = "tcp://" + impl.options.bind_host + ":" +
                                 std::to_string(impl.options.base_port + impl.options.member * n + r);
    zmq::socket_t& pull = pulls[r];
    try {
      security::apply(pull, impl.options.producers_curve);
      pull.bind(endpoint);
    } catch (const std::exception& error) {  // zmq::error_t, or a CURVE key that is not Z85
      throw AggregatorError("aggregator thread " + std::to_string(r) + " cannot bind " + endpoint + ": " +
                            error.what() + "; stop what holds the port or change [aggregator] base_port");
    }
    impl.endpoints.push_back(endpoint);
  }
  impl.directory = std::make_unique<detail::Directory>(impl.options.kvstore);
  impl.records = std::make_unique<detail::RecordStore>(impl.options.kvstore, impl.options.scan_record_ttl_s);
  impl.native_routes = std::make_unique<detail::NativeRoutes>(
      *impl.directory, *impl.records, impl.options.producer_threads,
      native_idle(impl.options.native_scan_idle_s));
  for (std::size_t r = 0; r < n; ++r) {
    const auto receiver = static_cast<std::uint32_t>(r);
    impl.counters.push_back(std::make_unique<RelayCounters>(receiver));
    detail::RelaySettings settings;
    settings.receiver = receiver;
    settings.member = impl.options.member;
    settings.members = impl.options.members;
    settings.slot = static_cast<std::uint32_t>(impl.options.member * n + r);
    settings.producer_threads = impl.options.producer_threads[r];
    settings.hwm = impl.options.hwm;
    settings.sndbuf_bytes = impl.options.sndbuf_bytes;
    settings.discovery_wait = std::chrono::milliseconds(impl.options.discovery_wait_ms);
    settings.send_timeout = std::chrono::milliseconds(impl.options.send_timeout_ms);
    settings.max_open_scans = impl.options.max_open_scans;
    settings.expect = protocol::DataExpectations{impl.options.geometry, {impl.options.max_scan_positions}, receiver};
    settings.native = impl.options.wire[r] == "native";
    settings.native_idle = native_idle(impl.options.native_scan_idle_s);
    settings.native_requested = impl.options.native_scans_requested;
    settings.downstream_curve = impl.options.nodegroups_curve;
    Impl* self = impl_.get();
    impl.relays.push_back(std::make_unique<detail::Relay>(
        impl.context, std::move(pulls[r]), *impl.directory, *impl.records, *impl.native_routes, settings,
        *impl.counters[r], [self](ScanSummary s) {
          const std::lock_guard<std::mutex> lock(self->mutex);
          self->summaries.push_back(std::move(s));
        }));
  }
}

Aggregator::~Aggregator() { stop(); }

bool Aggregator::wait_synced(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!impl_->directory->wait_synced(timeout)) return false;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return impl_->records->wait_synced(std::max(left, std::chrono::milliseconds(0)));
}

void Aggregator::start() {
  Impl& impl = *impl_;
  if (impl.started || impl.stopped) throw AggregatorError("aggregator: start() may be called once, before stop()");
  impl.started = true;
  for (std::size_t r = 0; r < impl.relays.size(); ++r) {
    impl.threads.push_back(protocol::start_worker_thread("sf-relay-" + std::to_string(r), [&impl, r] {
      try {
        impl.relays[r]->run(impl.stop);
      } catch (const std::exception& error) {
        const std::lock_guard<std::mutex> lock(impl.mutex);
        if (impl.failure.empty()) impl.failure = "aggregator thread " + std::to_string(r) + ": " + error.what();
      }
    }));
  }
}

void Aggregator::stop() {
  Impl& impl = *impl_;
  if (impl.stopped) return;
  impl.stopped = true;
  impl.stop.store(true);
  for (std::thread& thread : impl.threads) thread.join();
  impl.threads.clear();
  impl.relays.clear();  // closes the PULL sockets and the downstream sockets
  impl.directory->close();
  impl.records->close();  // sends the relay records still queued, within one silence period
}

std::size_t Aggregator::threads() const { return impl_->endpoints.size(); }

std::string Aggregator::endpoint(std::size_t thread) const {
  if (thread >= impl_->endpoints.size()) {
    throw AggregatorError("aggregator: no thread " + std::to_string(thread) + " (there are " +
                          std::to_string(impl_->endpoints.size()) + ")");
  }
  return impl_->endpoints[thread];
}

RelayStats Aggregator::stats(std::size_t thread) const {
  (void)endpoint(thread);  // range check with its message
  return impl_->counters[thread]->snapshot();
}

std::uint64_t Aggregator::bad_records() const { return impl_->directory->bad_records(); }

security::ZapStats Aggregator::zap_stats() const { return impl_->zap ? impl_->zap->stats() : security::ZapStats{}; }

std::vector<std::string> Aggregator::take_security_refusals() {
  return impl_->zap ? impl_->zap->take_refusals() : std::vector<std::string>{};
}

std::vector<ScanSummary> Aggregator::take_summaries() {
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<ScanSummary> out(std::make_move_iterator(impl_->summaries.begin()),
                               std::make_move_iterator(impl_->summaries.end()));
  impl_->summaries.clear();
  return out;
}

std::string Aggregator::failure() const {
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->failure;
}

const AggregatorOptions& Aggregator::options() const { return impl_->options; }

}  // namespace sectorflow::aggregator
