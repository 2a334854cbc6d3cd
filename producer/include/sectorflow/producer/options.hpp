// How one producer thread is wired: which sector it owns, which aggregator thread it feeds in which
// dialect, where the fallback files go. Every value but the last three comes from the
// configuration, filled by producer_options (from_config.hpp) from the beamline file, for a
// receiver program that embeds the library and for the daemon alike (its Config handed over as a
// Beamline): none has a default here, and the Producer refuses one left unset (0, NaN or
// Wire::kUnset), naming its key.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/security/curve.hpp"

namespace sectorflow::producer {

/// The dialect a receiver streams to its aggregator thread ([[receivers]] wire; protocol/SPEC.md,
/// "Two dialects"). kUnset only so that a program that forgets the key is refused, not defaulted.
enum class Wire { kUnset, kSectorflow, kNative };

/// "sectorflow", "native" ("" for kUnset): the configuration's spelling.
const char* to_string(Wire wire);
/// The Wire a configuration names; throws ProducerError naming the accepted values otherwise.
Wire parse_wire(const std::string& text);

struct ProducerOptions {
  protocol::Geometry geometry;  ///< [detector]
  std::uint32_t receiver = 0;   ///< the receiver index r: the sector this producer sends
  std::uint32_t thread_id = 0;  ///< t, from 0 to threads - 1
  /// T, the producer threads of this receiver ([[receivers]] threads); t sends the probe positions p
  /// with p % T == t (frame numbers first_frame + p).
  std::uint32_t threads = 0;
  /// [[receivers]] wire. kSectorflow: an info message, then data messages under SFSP's header.
  /// kNative: no info message; each data message under the 4D Camera receivers' own header, which
  /// says how many data messages the thread sends for the scan.
  Wire wire = Wire::kUnset;
  /// One PUSH socket's peer per member i of the aggregation tier (protocol/SPEC.md, "The
  /// aggregation tier"): member i's relay thread for this receiver,
  /// tcp://<member i's host>:(aggregator.base_port + i * receivers + r). Frame f goes to member
  /// f % size(). One entry: one aggregator, as before the tier; empty: no streaming.
  std::vector<std::string> aggregator_endpoints;
  /// Per member i, where the standby aggregator listens when it holds member i's lease
  /// ([aggregator] standby_host, port as member i's), member order; empty: no standby. An entry set
  /// and not the member's own endpoint, member i's socket connects to both with ZMQ_IMMEDIATE:
  /// messages go only to a completed connection, and only the holder of the member's lease binds.
  std::vector<std::string> standby_endpoints;
  /// producer.send_hwm: messages queued before a send blocks. Shallow on purpose: what waits
  /// here waits ahead of the sibling threads' sectors at the aggregator (sibling_gate.hpp).
  int send_hwm = 0;
  std::string fallback_dir;     ///< producer.fallback_dir: where a scan goes when nobody streams
  /// Ttl of status/producer/r<R>t<T> (kvstore.ttl_s); 0: none. NaN: not set.
  double status_ttl_s = std::numeric_limits<double>::quiet_NaN();
  /// Ttl of the scan record scans/<n>/producer/r<R>t<T> (kvstore.scan_record_ttl_s). NaN: not set.
  double scan_record_ttl_s = std::numeric_limits<double>::quiet_NaN();
  /// producer.send_timeout_ms: how long a send may stay blocked at the high-water mark before the
  /// thread decides that the aggregator is not taking the scan and spills the rest of it to a raw
  /// file. At least 1.
  int send_timeout_ms = 0;
  /// [security]: this receiver's producer key pair and the aggregator's public key; off: plain TCP.
  security::CurveClient curve;
  /// [security] with a tier: each member's public key (keys/aggregator/member-<i>.key), member
  /// order, for its socket; empty: curve.server_key for every member.
  std::vector<std::string> aggregator_keys;
  /// Not configuration: least time between two progress updates of the status and the scan record
  /// during a scan.
  int status_interval_ms = 500;
  /// Not configuration: how long closing the socket may wait for queued messages to leave
  /// (ZMQ_LINGER); -1 forever.
  int linger_ms = 5000;
  /// Not configuration: where the warning that a scan spills goes (one line, no newline); unset:
  /// standard error.
  std::function<void(const std::string& line)> warn;

  /// "r<receiver>t<thread_id>": the status name and the locator of log lines.
  std::string name() const { return "r" + std::to_string(receiver) + "t" + std::to_string(thread_id); }
};

}  // namespace sectorflow::producer
