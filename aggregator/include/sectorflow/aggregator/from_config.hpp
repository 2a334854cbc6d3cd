// The aggregator's keys of a beamline file ([aggregator], [[receivers]], [detector], [limits],
// [kvstore] heartbeats and scan_record_ttl_s) as AggregatorOptions: the one mapping of them, which
// the daemon calls (sectorflow.aggregator.options adds what the process owns: its kvstore client,
// with its callbacks and the tier member's key, and its CURVE servers).
#pragma once

#include <cstdint>

#include "sectorflow/aggregator/options.hpp"
#include "sectorflow/configs/beamline.hpp"

namespace sectorflow::aggregator {

/// Tier member `member`'s options, all but kvstore, producers_curve and nodegroups_curve. Throws
/// configs::ConfigError for a member the tier does not have (signed: as a command line gives it).
AggregatorOptions aggregator_options(const configs::Beamline& beamline, std::int64_t member);

}  // namespace sectorflow::aggregator
