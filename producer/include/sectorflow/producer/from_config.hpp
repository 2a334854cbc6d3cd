// The producer's keys of a beamline file ([detector], [[receivers]], [aggregator] host, tier,
// base_port and standby_host, [producer], [kvstore] ttls, [security]) as ProducerOptions: the one
// mapping of them, which a receiver program calls and the daemon too (sectorflow.producer.options
// adds only the warning callback).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sectorflow/configs/beamline.hpp"
#include "sectorflow/producer/options.hpp"

namespace sectorflow::producer {

/// Where each tier member's relay thread for `receiver` listens:
/// tcp://<member i's host>:(aggregator.base_port + i * receivers + receiver).
std::vector<std::string> aggregator_endpoints(const configs::Beamline& beamline, std::uint32_t receiver);
/// Per tier member i, where the standby aggregator listens for `receiver` when it holds member i's
/// lease: tcp://aggregator.standby_host:(member i's port); empty when no standby is configured.
std::vector<std::string> standby_endpoints(const configs::Beamline& beamline, std::uint32_t receiver);
/// [producer] max_lead_frames: how far a thread may run ahead of its slowest sibling (SiblingGate).
std::uint64_t max_lead_frames(const configs::Beamline& beamline);
/// Thread `thread_id` of `receiver`: [detector], [[receivers]] threads and wire, the aggregator
/// endpoints, [producer] send_hwm, send_timeout_ms and fallback_dir, [kvstore] ttl_s as the status
/// ttl and scan_record_ttl_s as the scan record's, and with [security] enabled (and not
/// plain_receivers) the producer key of [security] key_dir and the aggregator's (each tier
/// member's). Throws configs::ConfigError for a receiver or thread the file does not have,
/// security::SecurityError for a missing key.
ProducerOptions producer_options(const configs::Beamline& beamline, std::uint32_t receiver, std::uint32_t thread_id);

}  // namespace sectorflow::producer
