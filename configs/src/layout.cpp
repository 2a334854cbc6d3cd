#include "sectorflow/configs/layout.hpp"

namespace sectorflow::configs {

protocol::Geometry geometry(const Beamline& beamline) {
  protocol::Geometry geometry;
  geometry.frame_rows = beamline.whole<std::uint32_t>("detector.frame_rows");
  geometry.frame_cols = beamline.whole<std::uint32_t>("detector.frame_cols");
  geometry.sector_rows = beamline.whole<std::uint32_t>("detector.sector_rows");
  geometry.sector_cols = beamline.whole<std::uint32_t>("detector.sector_cols");
  const std::string dtype = beamline.text("detector.dtype");
  if (dtype == "uint8") {
    geometry.itemsize = 1;
  } else if (dtype == "uint16") {
    geometry.itemsize = 2;
  } else if (dtype == "uint32") {
    geometry.itemsize = 4;
  } else {
    throw ConfigError(beamline.source() + ": 'detector.dtype' = '" + dtype +
                      "': expected one of 'uint8', 'uint16', 'uint32'");
  }
  return geometry;
}

protocol::ScanLimits scan_limits(const Beamline& beamline) {
  return protocol::ScanLimits{beamline.whole<std::uint64_t>("limits.max_scan_positions")};
}

std::uint32_t receiver_threads(const Beamline& beamline, std::uint32_t receiver) {
  if (receiver >= beamline.receivers()) {
    throw ConfigError("receiver " + std::to_string(receiver) + ": " + beamline.source() + " has " +
                      std::to_string(beamline.receivers()) + " receivers ([[receivers]]), expected 0 to " +
                      std::to_string(beamline.receivers() - 1));
  }
  return beamline.whole<std::uint32_t>("receivers[" + std::to_string(receiver) + "].threads");
}

std::vector<std::uint32_t> producer_threads(const Beamline& beamline) {
  std::vector<std::uint32_t> threads;
  for (std::uint32_t receiver = 0; receiver < beamline.receivers(); ++receiver) {
    threads.push_back(receiver_threads(beamline, receiver));
  }
  return threads;
}

std::vector<std::string> aggregator_hosts(const Beamline& beamline) {
  std::vector<std::string> hosts = beamline.texts("aggregator.tier");
  if (hosts.empty()) hosts.push_back(beamline.text("aggregator.host"));
  return hosts;
}

}  // namespace sectorflow::configs
