#include "sectorflow/producer/from_config.hpp"

#include "sectorflow/configs/layout.hpp"
#include "sectorflow/producer/errors.hpp"
#include "sectorflow/security/from_config.hpp"
#include "sectorflow/security/key_directory.hpp"

namespace sectorflow::producer {
namespace {

// Member i's relay thread for `receiver` on each of `hosts` (one host per member).
std::vector<std::string> member_endpoints(const configs::Beamline& beamline, const std::vector<std::string>& hosts,
                                          std::uint32_t receiver) {
  const std::uint64_t receivers = configs::geometry(beamline).n_sectors();
  const std::uint64_t base_port = beamline.whole<std::uint16_t>("aggregator.base_port");
  std::vector<std::string> endpoints;
  for (std::size_t member = 0; member < hosts.size(); ++member) {
    const std::uint64_t port = base_port + member * receivers + std::uint64_t{receiver};
    endpoints.push_back("tcp://" + hosts[member] + ":" + std::to_string(port));
  }
  return endpoints;
}

}  // namespace

std::vector<std::string> aggregator_endpoints(const configs::Beamline& beamline, std::uint32_t receiver) {
  return member_endpoints(beamline, configs::aggregator_hosts(beamline), receiver);
}

std::vector<std::string> standby_endpoints(const configs::Beamline& beamline, std::uint32_t receiver) {
  const std::string host = beamline.text("aggregator.standby_host");
  if (host.empty()) return {};
  return member_endpoints(beamline, std::vector<std::string>(configs::aggregator_hosts(beamline).size(), host),
                          receiver);
}

std::uint64_t max_lead_frames(const configs::Beamline& beamline) {
  return beamline.whole<std::uint64_t>("producer.max_lead_frames");
}

ProducerOptions producer_options(const configs::Beamline& beamline, std::uint32_t receiver, std::uint32_t thread_id) {
  const std::uint32_t threads = configs::receiver_threads(beamline, receiver);
  if (thread_id >= threads) {
    throw configs::ConfigError("receiver " + std::to_string(receiver) + " has " + std::to_string(threads) +
                               " producer threads; thread " + std::to_string(thread_id) + " does not exist");
  }
  ProducerOptions options;
  options.geometry = configs::geometry(beamline);
  options.receiver = receiver;
  options.thread_id = thread_id;
  options.threads = threads;
  const std::string wire_key = "receivers[" + std::to_string(receiver) + "].wire";
  const std::string wire = beamline.text(wire_key);
  try {
    options.wire = parse_wire(wire);
  } catch (const ProducerError&) {
    throw configs::ConfigError(beamline.source() + ": '" + wire_key + "' = '" + wire +
                               "': expected 'sectorflow' or 'native'");
  }
  options.aggregator_endpoints = aggregator_endpoints(beamline, receiver);
  options.standby_endpoints = standby_endpoints(beamline, receiver);
  options.send_hwm = beamline.whole<int>("producer.send_hwm");
  options.fallback_dir = beamline.text("producer.fallback_dir");
  options.status_ttl_s = beamline.number("kvstore.ttl_s");
  options.scan_record_ttl_s = beamline.number("kvstore.scan_record_ttl_s");
  options.send_timeout_ms = beamline.whole<int>("producer.send_timeout_ms");
  if (!beamline.boolean("security.plain_receivers")) {
    const std::vector<std::string> hosts = configs::aggregator_hosts(beamline);
    if (hosts.size() == 1) {
      options.curve = security::curve_client(beamline, "producer", "aggregator");
    } else if (beamline.boolean("security.enabled")) {
      // A tier: each member proves its own key (keys/aggregator/member-<i>.key).
      const security::KeyDirectory keys(beamline.text("security.key_dir"));
      const security::Certificate own = keys.own("producer");
      options.curve = {own.public_key, own.secret_key, {}};
      for (std::size_t member = 0; member < hosts.size(); ++member) {
        options.aggregator_keys.push_back(
            keys.public_key("aggregator", security::tier_member_key_name(static_cast<std::uint32_t>(member))));
      }
      options.curve.server_key = options.aggregator_keys.front();
    }
  }
  return options;
}

}  // namespace sectorflow::producer
