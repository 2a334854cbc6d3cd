// sectorflow::configs: a beamline file read from C++ over the compiled-in defaults table, and the
// option structs each component maps from it (from_config.hpp), the mappings the daemons call too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "sectorflow/configs/beamline.hpp"
#include "sectorflow/configs/layout.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/from_config.hpp"
#include "sectorflow/producer/from_config.hpp"
#include "sectorflow/security/errors.hpp"
#include "sectorflow/simulator/from_config.hpp"

namespace cf = sectorflow::configs;
namespace kv = sectorflow::kvstore;
namespace sp = sectorflow::producer;

namespace {

const std::string kConfigs = SECTORFLOW_CONFIGS_DIR;

// The message of the ConfigError `read` throws, or "" (a failure) if it throws none.
std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const cf::ConfigError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no ConfigError";
  return "";
}

cf::Beamline beamline(const std::string& tables) {
  return cf::Beamline::parse(tables + "\n[[receivers]]\n", "beamline.toml");
}

}  // namespace

TEST(Beamline, TheCompiledInTableIsTheGeneratedFile) {
  std::ifstream file(kConfigs + "/defaults.toml");
  std::ostringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), cf::defaults_toml());
}

TEST(Beamline, EveryShippedFileIsRead) {
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".toml") continue;
    const cf::Beamline read = cf::Beamline::load(entry.path().string());
    EXPECT_EQ(read.receivers(), cf::geometry(read).n_sectors()) << entry.path();
  }
}

TEST(Beamline, AKeyTheFileLeavesOutHasTheSchemasDefault) {
  const cf::Beamline file = beamline("[aggregator]\nhwm = 200");
  EXPECT_EQ(file.integer("aggregator.hwm"), 200);
  EXPECT_EQ(file.integer("nodegroup.recv_hwm"), 16);
  EXPECT_EQ(file.integer("kvstore.max_keys"), 100000);
  EXPECT_EQ(file.number("kvstore.ttl_s"), 5.0);
  EXPECT_EQ(file.text("producer.fallback_dir"), "out/raw");
  EXPECT_EQ(file.integer("receivers[0].threads"), 1);
  EXPECT_EQ(file.receivers(), 1u);
}

TEST(Beamline, TheDefaultsAreACompleteConfiguration) {
  const cf::Beamline& defaults = cf::Beamline::defaults();
  EXPECT_EQ(defaults.receivers(), 4u);
  const sectorflow::protocol::Geometry geometry = cf::geometry(defaults);
  EXPECT_EQ(geometry.frame_rows, 576u);
  EXPECT_EQ(geometry.sector_rows, 144u);
  EXPECT_EQ(geometry.itemsize, 2u);
  geometry.validate();
  sectorflow::simulator::simulator_settings(defaults).validate();
}

TEST(Beamline, LocalTomlFillsAProducerThreadAsTheDaemonDoes) {
  const cf::Beamline local = cf::Beamline::load(kConfigs + "/local.toml");
  const sectorflow::producer::ProducerOptions options = sp::producer_options(local, 2, 0);
  EXPECT_EQ(options.geometry.sector_bytes(), 144u * 576u * 2u);
  EXPECT_EQ(options.receiver, 2u);
  EXPECT_EQ(options.threads, 1u);
  EXPECT_EQ(options.aggregator_endpoints, std::vector<std::string>{"tcp://127.0.0.1:6102"});
  EXPECT_TRUE(options.standby_endpoints.empty());  // no [aggregator] standby_host: one aggregator
  EXPECT_EQ(options.send_hwm, 16);
  EXPECT_EQ(options.fallback_dir, "out/raw");
  EXPECT_EQ(options.status_ttl_s, 5.0);
  EXPECT_EQ(options.scan_record_ttl_s, 86400.0);  // from the compiled-in defaults
  EXPECT_EQ(options.send_timeout_ms, 10000);
  EXPECT_EQ(options.wire, sectorflow::producer::Wire::kSectorflow);  // the default of [[receivers]] wire
  EXPECT_EQ(sp::max_lead_frames(local), 32u);
  EXPECT_EQ(cf::scan_limits(local).max_positions, 2048u * 2048u);

  const sectorflow::kvstore::ClientOptions client = kv::client_options(local, "nodegroups/");
  EXPECT_EQ(client.host, "127.0.0.1");
  EXPECT_EQ(client.port, 5556);
  EXPECT_EQ(client.subtree, "nodegroups/");
  EXPECT_EQ(client.heartbeat_ms, 1000u);
  EXPECT_EQ(client.silence_heartbeats, 3);
  EXPECT_EQ(client.max_value_bytes, 65536u);
  EXPECT_EQ(client.max_ttl_s, 86400.0);
  const sectorflow::kvstore::ServerOptions server = kv::server_options(local);
  EXPECT_EQ(server.max_map_bytes, std::size_t{256} << 20);
  EXPECT_EQ(server.max_keys_per_address, 25000u);
}

TEST(Beamline, ReceiversComeFromTheFile) {
  const cf::Beamline camera = cf::Beamline::load(kConfigs + "/4dcamera.toml");
  EXPECT_EQ(cf::receiver_threads(camera, 3), 4u);
  // The 5-host tier: member i's thread for receiver 3 on base_port + 4 i + 3.
  EXPECT_EQ(sp::aggregator_endpoints(camera, 3),
            (std::vector<std::string>{"tcp://aggregator-0.beamline.example:6103", "tcp://aggregator-1.beamline.example:6107",
                                      "tcp://aggregator-2.beamline.example:6111", "tcp://aggregator-3.beamline.example:6115",
                                      "tcp://aggregator-4.beamline.example:6119"}));
  // The spare stands in for any member on that member's ports.
  EXPECT_EQ(sp::standby_endpoints(camera, 3),
            (std::vector<std::string>{"tcp://aggregator-spare.beamline.example:6103",
                                      "tcp://aggregator-spare.beamline.example:6107",
                                      "tcp://aggregator-spare.beamline.example:6111",
                                      "tcp://aggregator-spare.beamline.example:6115",
                                      "tcp://aggregator-spare.beamline.example:6119"}));
  EXPECT_EQ(error_of([&] { sp::producer_options(camera, 4, 0); }),
            "receiver 4: " + kConfigs + "/4dcamera.toml has 4 receivers ([[receivers]]), expected 0 to 3");
  EXPECT_EQ(error_of([&] { sp::producer_options(camera, 0, 4); }),
            "receiver 0 has 4 producer threads; thread 4 does not exist");
  EXPECT_EQ(error_of([&] { camera.integer("receivers[4].threads"); }),
            kConfigs + "/4dcamera.toml: 'receivers[4].threads': the file lists 4 [[receivers]], numbered from 0");
}

// The beamline file turns [security] on: a receiver program connects with this host's producer key,
// and says which directory lacks it when it is not there.
TEST(Beamline, SecurityTakesTheProducerKeyFromTheKeyDirectory) {
  const cf::Beamline camera = cf::Beamline::load(kConfigs + "/4dcamera.toml");
  EXPECT_TRUE(camera.boolean("security.enabled"));
  try {
    sp::producer_options(camera, 0, 0);
    ADD_FAILURE() << "no SecurityError";
  } catch (const sectorflow::security::SecurityError& error) {
    EXPECT_EQ(std::string(error.what()).rfind("/etc/sectorflow/keys: no such key directory", 0), 0u) << error.what();
  }
  const cf::Beamline local = cf::Beamline::load(kConfigs + "/local.toml");
  EXPECT_FALSE(sp::producer_options(local, 0, 0).curve.enabled());
  EXPECT_FALSE(kv::client_options(local).curve.enabled());
}

TEST(Beamline, AReceiverSpeaksTheWireItsFileNames) {
  const cf::Beamline file = cf::Beamline::parse(
      "[[receivers]]\nwire = \"native\"\n[[receivers]]\n[[receivers]]\nwire = \"udp\"\n", "beamline.toml");
  EXPECT_EQ(sp::producer_options(file, 0, 0).wire, sectorflow::producer::Wire::kNative);
  EXPECT_EQ(sp::producer_options(file, 1, 0).wire, sectorflow::producer::Wire::kSectorflow);
  EXPECT_EQ(error_of([&] { sp::producer_options(file, 2, 0); }),
            "beamline.toml: 'receivers[2].wire' = 'udp': expected 'sectorflow' or 'native'");
}

TEST(Beamline, MistakesAreOneLineNamingTheFileAndTheKey) {
  EXPECT_EQ(error_of([] { beamline("[kvstore]\nprot = 1"); }),
            "beamline.toml: unknown key 'kvstore.prot'; did you mean 'port'?");
  EXPECT_EQ(error_of([] { beamline("[aggregator]\nhwn = 1"); }),
            "beamline.toml: unknown key 'aggregator.hwn'; did you mean 'hwm'?");
  EXPECT_EQ(error_of([] { beamline("[logging]\nzzzz = 1"); }),
            "beamline.toml: unknown key 'logging.zzzz'; known keys: level");
  EXPECT_EQ(error_of([] { beamline("[aggregator]\nhwm = \"many\""); }),
            "beamline.toml: 'aggregator.hwm' = 'many': expected an integer");
  EXPECT_EQ(error_of([] { beamline("kvstore = 5"); }), "beamline.toml: 'kvstore' = 5: expected a table");
  EXPECT_EQ(error_of([] { cf::Beamline::parse("[[receivers]]\nthreds = 2\n", "beamline.toml"); }),
            "beamline.toml: unknown key 'receivers[0].threds'; did you mean 'threads'?");
  EXPECT_EQ(error_of([] { cf::Beamline::parse("[detector]\n", "beamline.toml"); }),
            "beamline.toml: 'receivers' must be a non-empty array of tables ([[receivers]]), one per sector");
  EXPECT_EQ(error_of([] { kv::client_options(beamline("[kvstore]\nport = 70000")); }),
            "beamline.toml: 'kvstore.port' = 70000: expected a value from 0 to 65535");
  EXPECT_EQ(error_of([] { cf::geometry(beamline("[detector]\ndtype = \"float32\"")); }),
            "beamline.toml: 'detector.dtype' = 'float32': expected one of 'uint8', 'uint16', 'uint32'");
  EXPECT_EQ(error_of([] { cf::Beamline::parse("[kvstore\n", "broken.toml"); }).rfind("broken.toml: not valid TOML: ", 0),
            0u);
  EXPECT_EQ(error_of([] { cf::Beamline::load("/nonexistent/beamline.toml"); }),
            "/nonexistent/beamline.toml: cannot read the configuration file (does it exist?)");
  EXPECT_EQ(error_of([] { cf::Beamline::defaults().integer("kvstore.nonsense"); }),
            "no configuration key 'kvstore.nonsense' (docs/configuration.md lists them)");
}

TEST(Beamline, ANumberTakesAnIntegerAndADictTakesAnyKey) {
  const cf::Beamline file = beamline("[kvstore]\nttl_s = 2\n[slurm.environment]\nOMP_NUM_THREADS = \"1\"");
  EXPECT_EQ(file.number("kvstore.ttl_s"), 2.0);
  EXPECT_EQ(file.text("slurm.environment.OMP_NUM_THREADS"), "1");
}

TEST(Beamline, KvstoreServersAreAListOfStringsTheClientChecks) {
  EXPECT_TRUE(kv::client_options(beamline("")).servers.empty());
  const auto pair = kv::client_options(beamline("[kvstore]\nservers = [\"10.0.0.1:5556\", \"10.0.0.2:5556\"]"));
  EXPECT_EQ(pair.servers, (std::vector<std::string>{"10.0.0.1:5556", "10.0.0.2:5556"}));
  const auto addresses = sectorflow::kvstore::server_addresses(pair);
  ASSERT_EQ(addresses.size(), 2u);
  EXPECT_EQ(addresses[1].host, "10.0.0.2");
  EXPECT_EQ(addresses[1].port, 5556);
  EXPECT_EQ(error_of([] { kv::client_options(beamline("[kvstore]\nservers = [\"a:1\", 2]")); }),
            "beamline.toml: 'kvstore.servers' = [ 'a:1', 2 ]: expected an array of strings");
  EXPECT_EQ(error_of([] { kv::client_options(beamline("[kvstore]\nservers = \"a:1\"")); }),
            "beamline.toml: 'kvstore.servers' = 'a:1': expected an array");
  // The struct refuses what it cannot use, one line naming the entry (a C++ program that skips the loader).
  const auto refused = [](std::vector<std::string> servers) {
    sectorflow::kvstore::ClientOptions options;
    options.servers = std::move(servers);
    try {
      sectorflow::kvstore::server_addresses(options);
    } catch (const sectorflow::kvstore::KvstoreError& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refused({"nohost"}), "kvstore client: server 0 'nohost': expected \"host:port\" (a server's address and "
                                 "its snapshot port P; [kvstore] servers)");
  EXPECT_EQ(refused({"a:1", "a:65534"}), "kvstore client: server 1 'a:65534': port 65534 out of range: expected 1 to "
                                         "65533 (the server uses P, P + 1 and P + 2; [kvstore] servers)");
  EXPECT_EQ(refused({"a:1", "a:1"}),
            "kvstore client: server 1 'a:1' is listed twice: the pair is two different servers ([kvstore] servers)");
  EXPECT_EQ(refused({"a:1", "b:1", "c:1"}), "kvstore client: 3 servers given: a kvstore pair (Binary Star) is a "
                                            "primary and a backup, so at most 2 ([kvstore] servers)");
  EXPECT_EQ(refused({":1"}).rfind("kvstore client: server 0 ':1': expected", 0), 0u);
}

TEST(Beamline, AClientStartsAtTheFirstServerItIsGiven) {
  sectorflow::kvstore::ClientOptions options;
  options.servers = {"10.0.0.1:5556", "10.0.0.2:5556"};
  EXPECT_EQ(sectorflow::kvstore::first_server_index(options), 0u);  // none given: the primary
  options.first_server = "10.0.0.2:5556";
  EXPECT_EQ(sectorflow::kvstore::first_server_index(options), 1u);
  options.first_server = "10.0.0.3:5556";
  try {
    sectorflow::kvstore::first_server_index(options);
    ADD_FAILURE() << "a first server that is not configured was taken";
  } catch (const sectorflow::kvstore::KvstoreError& error) {
    EXPECT_EQ(std::string(error.what()), "kvstore client: first server '10.0.0.3:5556' is not one of the servers "
                                         "configured ([kvstore] servers, or host:port)");
  }
}
