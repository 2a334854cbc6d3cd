#include "sectorflow/configs/options.hpp"

#include <limits>
#include <type_traits>
#include <utility>

#include "sectorflow/producer/errors.hpp"
#include "sectorflow/security/key_directory.hpp"

namespace sectorflow::configs {
namespace {

// The integer at `key` as a T; a value T cannot hold is refused by name instead of wrapped around.
template <typename T>
T whole(const Beamline& beamline, const std::string& key) {
  const std::int64_t value = beamline.integer(key);
  bool fits = false;
  if (value >= 0) {
    fits = static_cast<std::uint64_t>(value) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  } else if constexpr (std::is_signed_v<T>) {
    fits = value >= static_cast<std::int64_t>(std::numeric_limits<T>::min());
  }
  if (!fits) {
    throw ConfigError(beamline.source() + ": '" + key + "' = " + std::to_string(value) + ": expected a value from " +
                      std::to_string(std::numeric_limits<T>::min()) + " to " +
                      std::to_string(std::numeric_limits<T>::max()));
  }
  return static_cast<T>(value);
}

// [security]: this host's pair of `role` and the public key of `server_role`; off when disabled.
security::CurveClient curve_client(const Beamline& beamline, const std::string& role, const std::string& server_role) {
  security::CurveClient curve;
  if (!beamline.boolean("security.enabled")) return curve;
  const security::KeyDirectory keys(beamline.text("security.key_dir"));
  const security::Certificate own = keys.own(role);
  curve.public_key = own.public_key;
  curve.secret_key = own.secret_key;
  curve.server_key = keys.public_key(server_role);
  return curve;
}

void check_receiver(const Beamline& beamline, std::uint32_t receiver) {
  if (receiver >= beamline.receivers()) {
    throw ConfigError("receiver " + std::to_string(receiver) + ": " + beamline.source() + " has " +
                      std::to_string(beamline.receivers()) + " receivers ([[receivers]]), expected 0 to " +
                      std::to_string(beamline.receivers() - 1));
  }
}

}  // namespace

protocol::Geometry geometry(const Beamline& beamline) {
  protocol::Geometry geometry;
  geometry.frame_rows = whole<std::uint32_t>(beamline, "detector.frame_rows");
  geometry.frame_cols = whole<std::uint32_t>(beamline, "detector.frame_cols");
  geometry.sector_rows = whole<std::uint32_t>(beamline, "detector.sector_rows");
  geometry.sector_cols = whole<std::uint32_t>(beamline, "detector.sector_cols");
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
  return protocol::ScanLimits{whole<std::uint64_t>(beamline, "limits.max_scan_positions")};
}

kvstore::ClientOptions client_options(const Beamline& beamline, std::string subtree, const std::string& role) {
  kvstore::ClientOptions options;
  options.host = beamline.text("kvstore.host");
  options.port = whole<std::uint16_t>(beamline, "kvstore.port");
  options.servers = beamline.texts("kvstore.servers");
  options.subtree = std::move(subtree);
  options.heartbeat_ms = whole<std::uint32_t>(beamline, "kvstore.heartbeat_ms");
  options.silence_heartbeats = whole<int>(beamline, "kvstore.silence_heartbeats");
  options.max_value_bytes = whole<std::size_t>(beamline, "kvstore.max_value_bytes");
  options.max_ttl_s = beamline.number("kvstore.max_ttl_s");
  options.curve = curve_client(beamline, role, "kvstore");
  return options;
}

kvstore::ServerOptions server_options(const Beamline& beamline) {
  kvstore::ServerOptions options;
  options.bind_host = beamline.text("kvstore.bind_host");
  options.port = whole<std::uint16_t>(beamline, "kvstore.port");
  options.heartbeat_ms = whole<std::uint32_t>(beamline, "kvstore.heartbeat_ms");
  options.max_value_bytes = whole<std::size_t>(beamline, "kvstore.max_value_bytes");
  options.max_keys = whole<std::size_t>(beamline, "kvstore.max_keys");
  options.max_map_bytes = whole<std::size_t>(beamline, "kvstore.max_map_bytes");
  options.max_keys_per_address = whole<std::size_t>(beamline, "kvstore.max_keys_per_address");
  options.max_map_bytes_per_address = whole<std::size_t>(beamline, "kvstore.max_map_bytes_per_address");
  options.max_stack_keys = whole<std::size_t>(beamline, "kvstore.max_stack_keys");
  options.max_stack_bytes = whole<std::size_t>(beamline, "kvstore.max_stack_bytes");
  options.max_ttl_s = beamline.number("kvstore.max_ttl_s");
  options.scans_kept = whole<std::size_t>(beamline, "kvstore.scans_kept");
  for (std::uint32_t receiver = 0; receiver < beamline.receivers(); ++receiver) {
    options.producer_threads.push_back(receiver_threads(beamline, receiver));
  }
  options.log.dir = beamline.text("kvstore.log_dir");
  options.log.fsync = kvstore::parse_log_fsync(beamline.text("kvstore.log_fsync"));
  options.log.fsync_interval = std::chrono::milliseconds(whole<std::uint32_t>(beamline, "kvstore.log_fsync_interval_ms"));
  options.log.max_bytes = whole<std::uint64_t>(beamline, "kvstore.log_max_bytes");
  return options;
}

std::uint32_t receiver_threads(const Beamline& beamline, std::uint32_t receiver) {
  check_receiver(beamline, receiver);
  return whole<std::uint32_t>(beamline, "receivers[" + std::to_string(receiver) + "].threads");
}

std::vector<std::string> aggregator_hosts(const Beamline& beamline) {
  std::vector<std::string> hosts = beamline.texts("aggregator.tier");
  if (hosts.empty()) hosts.push_back(beamline.text("aggregator.host"));
  return hosts;
}

namespace {

// Member i's relay thread for `receiver` on each of `hosts` (one host per member).
std::vector<std::string> member_endpoints(const Beamline& beamline, const std::vector<std::string>& hosts,
                                          std::uint32_t receiver) {
  const std::uint64_t receivers = geometry(beamline).n_sectors();
  std::vector<std::string> endpoints;
  for (std::size_t member = 0; member < hosts.size(); ++member) {
    const std::uint64_t port =
        whole<std::uint16_t>(beamline, "aggregator.base_port") + member * receivers + std::uint64_t{receiver};
    endpoints.push_back("tcp://" + hosts[member] + ":" + std::to_string(port));
  }
  return endpoints;
}

}  // namespace

std::vector<std::string> aggregator_endpoints(const Beamline& beamline, std::uint32_t receiver) {
  return member_endpoints(beamline, aggregator_hosts(beamline), receiver);
}

std::vector<std::string> standby_endpoints(const Beamline& beamline, std::uint32_t receiver) {
  const std::string host = beamline.text("aggregator.standby_host");
  if (host.empty()) return {};
  return member_endpoints(beamline, std::vector<std::string>(aggregator_hosts(beamline).size(), host), receiver);
}

std::uint64_t max_lead_frames(const Beamline& beamline) {
  return whole<std::uint64_t>(beamline, "producer.max_lead_frames");
}

producer::ProducerOptions producer_options(const Beamline& beamline, std::uint32_t receiver, std::uint32_t thread_id) {
  const std::uint32_t threads = receiver_threads(beamline, receiver);
  if (thread_id >= threads) {
    throw ConfigError("receiver " + std::to_string(receiver) + " has " + std::to_string(threads) +
                      " producer threads; thread " + std::to_string(thread_id) + " does not exist");
  }
  producer::ProducerOptions options;
  options.geometry = geometry(beamline);
  options.receiver = receiver;
  options.thread_id = thread_id;
  options.threads = threads;
  const std::string wire_key = "receivers[" + std::to_string(receiver) + "].wire";
  const std::string wire = beamline.text(wire_key);
  try {
    options.wire = producer::parse_wire(wire);
  } catch (const producer::ProducerError&) {
    throw ConfigError(beamline.source() + ": '" + wire_key + "' = '" + wire + "': expected 'sectorflow' or 'native'");
  }
  options.aggregator_endpoints = aggregator_endpoints(beamline, receiver);
  options.standby_endpoints = standby_endpoints(beamline, receiver);
  options.send_hwm = whole<int>(beamline, "producer.send_hwm");
  options.fallback_dir = beamline.text("producer.fallback_dir");
  options.status_ttl_s = beamline.number("kvstore.ttl_s");
  options.scan_record_ttl_s = beamline.number("kvstore.scan_record_ttl_s");
  options.send_timeout_ms = whole<int>(beamline, "producer.send_timeout_ms");
  if (!beamline.boolean("security.plain_receivers")) {
    const std::vector<std::string> hosts = aggregator_hosts(beamline);
    if (hosts.size() == 1) {
      options.curve = curve_client(beamline, "producer", "aggregator");
    } else if (beamline.boolean("security.enabled")) {
      // A tier: each member proves its own key (keys/aggregator/member-<i>.key).
      const security::KeyDirectory keys(beamline.text("security.key_dir"));
      const security::Certificate own = keys.own("producer");
      options.curve = {own.public_key, own.secret_key, {}};
      for (std::size_t member = 0; member < hosts.size(); ++member) {
        options.aggregator_keys.push_back(keys.public_key("aggregator", security::tier_member_key_name(static_cast<std::uint32_t>(member))));
      }
      options.curve.server_key = options.aggregator_keys.front();
    }
  }
  return options;
}

simulator::SimulatorSettings simulator_settings(const Beamline& beamline) {
  simulator::SimulatorSettings settings;
  settings.seed = whole<std::uint64_t>(beamline, "simulator.seed");
  settings.dose_per_frame = beamline.number("simulator.dose_per_frame");
  settings.electron_adu = beamline.number("simulator.electron_adu");
  settings.electron_spread_px = beamline.number("simulator.electron_spread_px");
  settings.dark_mean_adu = beamline.number("simulator.dark_mean_adu");
  settings.dark_sigma_adu = beamline.number("simulator.dark_sigma_adu");
  settings.bright_field_radius_px = beamline.number("simulator.bright_field_radius_px");
  settings.dropped_fraction = beamline.number("simulator.dropped_fraction");
  // The schema allows only these two names.
  settings.specimen = beamline.text("simulator.specimen") == "crystal" ? simulator::SpecimenKind::kCrystal
                                                                         : simulator::SpecimenKind::kNone;
  settings.specimen_grain_px = beamline.number("simulator.specimen_grain_px");
  settings.specimen_bright_field = beamline.number("simulator.specimen_bright_field");
  settings.specimen_dark_field = beamline.number("simulator.specimen_dark_field");
  settings.specimen_shift_px = beamline.number("simulator.specimen_shift_px");
  return settings;
}

}  // namespace sectorflow::configs
