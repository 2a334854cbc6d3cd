#include "sectorflow/aggregator/from_config.hpp"

#include <string>

#include "sectorflow/configs/layout.hpp"

namespace sectorflow::aggregator {

AggregatorOptions aggregator_options(const configs::Beamline& beamline, std::int64_t member) {
  const std::size_t members = configs::aggregator_hosts(beamline).size();
  if (member < 0 || static_cast<std::uint64_t>(member) >= members) {
    throw configs::ConfigError("aggregator member " + std::to_string(member) + ": " + beamline.source() +
                               " has a tier of " + std::to_string(members) + " ([aggregator] tier), expected 0 to " +
                               std::to_string(members - 1));
  }
  AggregatorOptions options;
  options.bind_host = beamline.text("aggregator.bind_host");
  options.base_port = beamline.whole<std::uint16_t>("aggregator.base_port");
  options.member = static_cast<std::uint32_t>(member);
  options.members = static_cast<std::uint32_t>(members);
  options.producer_threads = configs::producer_threads(beamline);
  options.hwm = beamline.whole<int>("aggregator.hwm");
  options.sndbuf_bytes = beamline.whole<int>("aggregator.sndbuf_bytes");
  // As long as a replica may be silent (kvstore/SPEC.md): a NodeGroup missing for longer is gone.
  options.discovery_wait_ms = beamline.whole<std::uint32_t>("kvstore.silence_heartbeats") *
                              beamline.whole<std::uint32_t>("kvstore.heartbeat_ms");
  options.max_open_scans = beamline.whole<std::uint32_t>("limits.max_open_scans");
  options.send_timeout_ms = beamline.whole<std::uint32_t>("aggregator.send_timeout_ms");
  options.scan_record_ttl_s = beamline.number("kvstore.scan_record_ttl_s");
  for (std::uint32_t receiver = 0; receiver < beamline.receivers(); ++receiver) {
    options.wire.push_back(beamline.text("receivers[" + std::to_string(receiver) + "].wire"));
  }
  options.native_scan_idle_s = beamline.number("aggregator.native_scan_idle_s");
  options.native_scans_requested = beamline.boolean("aggregator.native_scans_requested");
  options.geometry = configs::geometry(beamline);
  options.max_scan_positions = configs::scan_limits(beamline).max_positions;
  return options;
}

}  // namespace sectorflow::aggregator
