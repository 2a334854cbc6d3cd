// How one producer thread is wired: which sector it owns, which aggregator thread it feeds, where
// the fallback files go. Filled from the configuration by the daemon (producer/daemon.py) or by a
// receiver program that embeds the library.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "sectorflow/protocol/geometry.hpp"

namespace sectorflow::producer {

struct ProducerOptions {
  protocol::Geometry geometry;
  std::uint32_t receiver = 0;   ///< the receiver index r: the sector this producer sends
  std::uint32_t thread_id = 0;  ///< t, from 0 to threads - 1
  std::uint32_t threads = 1;    ///< T, the producer threads of this receiver; t sends frames f with f % T == t
  /// The PUSH socket's peer: aggregator thread r, tcp://aggregator.host:(aggregator.base_port + r).
  std::string aggregator_endpoint;
  /// producer.send_hwm: messages queued before a send blocks. Shallow on purpose: what waits
  /// here waits ahead of the sibling threads' sectors at the aggregator (sibling_gate.hpp).
  int send_hwm = 16;
  std::string fallback_dir;     ///< producer.fallback_dir: where a scan goes when nobody streams
  double status_ttl_s = 5.0;    ///< ttl of status/producer/r<R>t<T> (kvstore.ttl_s); 0: none
  /// Least time between two progress updates of the status during a scan.
  int status_interval_ms = 500;
  /// How long closing the socket may wait for queued messages to leave (ZMQ_LINGER); -1 forever.
  int linger_ms = 5000;

  /// What every producer thread must be given; the rest keep their defaults.
  static ProducerOptions for_thread(const protocol::Geometry& geometry, std::uint32_t receiver, std::uint32_t thread_id,
                                    std::uint32_t threads, std::string aggregator_endpoint) {
    ProducerOptions options;
    options.geometry = geometry;
    options.receiver = receiver;
    options.thread_id = thread_id;
    options.threads = threads;
    options.aggregator_endpoint = std::move(aggregator_endpoint);
    return options;
  }

  /// "r<receiver>t<thread_id>": the status name and the locator of log lines.
  std::string name() const { return "r" + std::to_string(receiver) + "t" + std::to_string(thread_id); }
};

}  // namespace sectorflow::producer
