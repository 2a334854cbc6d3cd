#include "sectorflow/kvstore/from_config.hpp"

#include <chrono>
#include <utility>

#include "sectorflow/configs/layout.hpp"
#include "sectorflow/security/from_config.hpp"

namespace sectorflow::kvstore {

ClientOptions unkeyed_client_options(const configs::Beamline& beamline, std::string subtree) {
  ClientOptions options;
  options.host = beamline.text("kvstore.host");
  options.port = beamline.whole<std::uint16_t>("kvstore.port");
  options.servers = beamline.texts("kvstore.servers");
  options.subtree = std::move(subtree);
  options.heartbeat_ms = beamline.whole<std::uint32_t>("kvstore.heartbeat_ms");
  options.silence_heartbeats = beamline.whole<int>("kvstore.silence_heartbeats");
  options.max_value_bytes = beamline.whole<std::size_t>("kvstore.max_value_bytes");
  options.max_ttl_s = beamline.number("kvstore.max_ttl_s");
  return options;
}

ClientOptions client_options(const configs::Beamline& beamline, std::string subtree, const std::string& role) {
  ClientOptions options = unkeyed_client_options(beamline, std::move(subtree));
  options.curve = security::curve_client(beamline, role, "kvstore");
  return options;
}

ServerOptions server_options(const configs::Beamline& beamline) {
  ServerOptions options;
  options.bind_host = beamline.text("kvstore.bind_host");
  options.port = beamline.whole<std::uint16_t>("kvstore.port");
  options.heartbeat_ms = beamline.whole<std::uint32_t>("kvstore.heartbeat_ms");
  options.max_value_bytes = beamline.whole<std::size_t>("kvstore.max_value_bytes");
  options.max_keys = beamline.whole<std::size_t>("kvstore.max_keys");
  options.max_map_bytes = beamline.whole<std::size_t>("kvstore.max_map_bytes");
  options.max_keys_per_address = beamline.whole<std::size_t>("kvstore.max_keys_per_address");
  options.max_map_bytes_per_address = beamline.whole<std::size_t>("kvstore.max_map_bytes_per_address");
  options.max_stack_keys = beamline.whole<std::size_t>("kvstore.max_stack_keys");
  options.max_stack_bytes = beamline.whole<std::size_t>("kvstore.max_stack_bytes");
  options.max_ttl_s = beamline.number("kvstore.max_ttl_s");
  options.scans_kept = beamline.whole<std::size_t>("kvstore.scans_kept");
  options.producer_threads = configs::producer_threads(beamline);
  options.log.dir = beamline.text("kvstore.log_dir");
  options.log.fsync = parse_log_fsync(beamline.text("kvstore.log_fsync"));
  options.log.fsync_interval = std::chrono::milliseconds(beamline.whole<std::uint32_t>("kvstore.log_fsync_interval_ms"));
  options.log.max_bytes = beamline.whole<std::uint64_t>("kvstore.log_max_bytes");
  return options;
}

}  // namespace sectorflow::kvstore
