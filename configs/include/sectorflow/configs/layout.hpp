// What several components read alike from a beamline file: the detector's geometry, its receivers,
// the aggregation tier's hosts and the largest scan. Each component maps its own option struct
// beside itself (sectorflow/<component>/from_config.hpp) and takes these from here, so that the
// producer, the aggregator and the kvstore agree on them. A value that does not fit its field's
// type is a ConfigError naming the key (Beamline::whole).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sectorflow/configs/beamline.hpp"
#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::configs {

/// [detector]: frame and sector shape, the bytes of a dtype pixel.
protocol::Geometry geometry(const Beamline& beamline);
/// [limits] max_scan_positions.
protocol::ScanLimits scan_limits(const Beamline& beamline);
/// [[receivers]] threads of `receiver`; throws ConfigError for a receiver the file does not list.
std::uint32_t receiver_threads(const Beamline& beamline, std::uint32_t receiver);
/// [[receivers]] threads of every receiver, receiver order.
std::vector<std::uint32_t> producer_threads(const Beamline& beamline);
/// The aggregation tier's hosts, member order: [aggregator] tier, or [aggregator] host alone.
std::vector<std::string> aggregator_hosts(const Beamline& beamline);

}  // namespace sectorflow::configs
