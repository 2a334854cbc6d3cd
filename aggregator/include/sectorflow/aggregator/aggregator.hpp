// The aggregator (protocol/SPEC.md steps 4 and 5): one relay thread per receiver, each
// pulling from that receiver's producer threads and pushing every data message, unchanged, to the
// NodeGroup its frame number routes it to. NodeGroups are found in the kvstore (nodegroups/*).
//
// Threads: construct (binds every PULL socket, so a taken port fails here), start() once, read
// stats() and take_summaries() from any thread, stop() (or the destructor) joins.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "sectorflow/aggregator/counters.hpp"
#include "sectorflow/aggregator/options.hpp"
#include "sectorflow/security/zap_handler.hpp"

namespace sectorflow::aggregator {

class Aggregator {
 public:
  /// Binds thread r's PULL socket on tcp://bind_host:(base_port + r) for every receiver and starts
  /// the kvstore replica. Throws AggregatorError naming the address if a port cannot be bound, or
  /// the option if the options are invalid (no receivers, a receiver with 0 producer threads,
  /// ports beyond 65535, hwm below 1).
  explicit Aggregator(AggregatorOptions options);
  /// stop().
  ~Aggregator();
  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;

  /// Waits until both kvstore replicas (nodegroups/, scans/) are complete and live, at most
  /// `timeout`; returns whether they are. Before start(), so that a restarted relay finds the
  /// producers' scan records of a scan in flight in its first lookup.
  bool wait_synced(std::chrono::milliseconds timeout) const;
  /// Starts the relay threads. Throws AggregatorError if already started or stopped.
  void start();
  /// Stops and joins the relay threads and closes every socket and the replica. Idempotent.
  void stop();
  /// Number of relay threads (receivers).
  std::size_t threads() const;
  /// "tcp://bind_host:port" of thread r. Throws AggregatorError for a thread that does not exist.
  std::string endpoint(std::size_t thread) const;
  /// The counters of thread r. Throws AggregatorError for a thread that does not exist.
  RelayStats stats(std::size_t thread) const;
  /// NodeGroup registrations that did not decode, reported so far (their NodeGroups count as absent).
  std::uint64_t bad_records() const;
  /// Peers refused and accepted at the CURVE handshake (producers and NodeGroups); zeros without CURVE.
  security::ZapStats zap_stats() const;
  /// One line per peer key refused for the first time since the last call (log them once).
  std::vector<std::string> take_security_refusals();
  /// The scans that ended since the last call, in the order they ended.
  std::vector<ScanSummary> take_summaries();
  /// The first relay thread failure ("" if none); a failed thread has stopped.
  std::string failure() const;
  const AggregatorOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sectorflow::aggregator
