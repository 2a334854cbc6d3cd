// The option structs a receiver program needs, filled from a beamline file the way the Python side
// fills them from a loaded configuration (Config.geometry(), kvstore/options.py,
// producer/options.py, simulator/from_config.py): the same keys, so a program that embeds the
// library and the daemons of the same file agree. A value that does not fit its field's type
// (a negative count, a port above 65535) is a ConfigError naming the key; ranges beyond that are
// checked by the structs themselves when used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sectorflow/configs/beamline.hpp"
#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/kvstore/server.hpp"
#include "sectorflow/producer/options.hpp"
#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/protocol/limits.hpp"
#include "sectorflow/simulator/settings.hpp"

namespace sectorflow::configs {

/// [detector]: frame and sector shape, the bytes of a dtype pixel.
protocol::Geometry geometry(const Beamline& beamline);
/// [limits] max_scan_positions.
protocol::ScanLimits scan_limits(const Beamline& beamline);
/// [kvstore]: how a client reaches the server and what it may send; `subtree` as ClientOptions.
/// With [security] enabled, the client connects with the key of `role` from [security] key_dir
/// (a receiver program is a producer). Throws security::SecurityError for a missing key.
kvstore::ClientOptions client_options(const Beamline& beamline, std::string subtree = "",
                                      const std::string& role = "producer");
/// [kvstore]: where the server binds, its heartbeat and its bounds.
kvstore::ServerOptions server_options(const Beamline& beamline);
/// [[receivers]] threads of `receiver`; throws ConfigError for a receiver the file does not list.
std::uint32_t receiver_threads(const Beamline& beamline, std::uint32_t receiver);
/// The aggregation tier's hosts, member order: [aggregator] tier, or [aggregator] host alone.
std::vector<std::string> aggregator_hosts(const Beamline& beamline);
/// Where each tier member's relay thread for `receiver` listens:
/// tcp://<member i's host>:(aggregator.base_port + i * receivers + receiver).
std::vector<std::string> aggregator_endpoints(const Beamline& beamline, std::uint32_t receiver);
/// Per tier member i, where the standby aggregator listens for `receiver` when it holds member i's
/// lease: tcp://aggregator.standby_host:(member i's port); empty when no standby is configured.
std::vector<std::string> standby_endpoints(const Beamline& beamline, std::uint32_t receiver);
/// [producer] max_lead_frames: how far a thread may run ahead of its slowest sibling (SiblingGate).
std::uint64_t max_lead_frames(const Beamline& beamline);
/// Thread `thread_id` of `receiver`: [detector], [[receivers]] threads and wire, the aggregator endpoint,
/// [producer] send_hwm, send_timeout_ms and fallback_dir, [kvstore] ttl_s as the status ttl and
/// scan_record_ttl_s as the scan record's, and with [security] enabled the producer key of
/// [security] key_dir. Throws ConfigError for a receiver or thread the file does not have,
/// security::SecurityError for a missing key.
producer::ProducerOptions producer_options(const Beamline& beamline, std::uint32_t receiver, std::uint32_t thread_id);
/// [simulator], all but rate_hz (the pacer's).
simulator::SimulatorSettings simulator_settings(const Beamline& beamline);

}  // namespace sectorflow::configs
