// The kvstore from C++ alone, as a producer or aggregator uses it: the golden kvmsg frames and
// schema records (also decoded by tests/unit/test_kvmsg.py and test_kvstore_schema.py), and a
// server and clients in one process over real loopback sockets.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sectorflow/configs/beamline.hpp"
#include "sectorflow/kvstore/from_config.hpp"
#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"
#include "sectorflow/kvstore/server.hpp"
#include "sectorflow/kvstore/stack_policy.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/protocol/scan_records.hpp"

#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace kv = sectorflow::kvstore;
namespace sp = sectorflow::protocol;
using namespace std::chrono_literals;

namespace {

std::string golden(const std::string& name) {
  std::ifstream in(std::string(SECTORFLOW_TEST_DATA) + "/" + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open golden file " + name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// tests/data/*.frames: each frame is a 4-byte big-endian length and its bytes.
std::vector<std::string> golden_frames(const std::string& name) {
  const std::string raw = golden(name);
  std::vector<std::string> frames;
  for (std::size_t offset = 0; offset + 4 <= raw.size();) {
    std::size_t size = 0;
    for (int i = 0; i < 4; ++i) size = (size << 8) | static_cast<unsigned char>(raw[offset + i]);
    frames.push_back(raw.substr(offset + 4, size));
    offset += 4 + size;
  }
  return frames;
}

kv::KvMsg decode(const std::vector<std::string>& frames) {
  return kv::decode_kvmsg(std::vector<std::string_view>(frames.begin(), frames.end()));
}

// Polls `condition` every 10 ms until it holds or `timeout` passes (a deadline, not a speed test).
bool wait_for(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A port the kernel handed out for port 0 a moment ago.
std::uint16_t ephemeral_port() {
  zmq::context_t context;
  zmq::socket_t probe(context, zmq::socket_type::rep);
  probe.bind("tcp://127.0.0.1:*");
  const std::string endpoint = probe.get(zmq::sockopt::last_endpoint);
  return static_cast<std::uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
}

// A server's options as the configuration's defaults make them ([kvstore], configs/defaults.toml).
kv::ServerOptions default_server_options() {
  return sectorflow::kvstore::server_options(sectorflow::configs::Beamline::defaults());
}

// A server with `options` on three free consecutive loopback ports (the first from port 0),
// running in a thread; with `policy`, the stack's policy it makes, else sectorflow's.
class RunningServer {
 public:
  using PolicyFactory = std::function<std::unique_ptr<const kv::StackPolicy>()>;

  explicit RunningServer(kv::ServerOptions options = default_server_options(), const PolicyFactory& policy = {}) {
    options.bind_host = "127.0.0.1";
    options.heartbeat_ms = 100;
    for (int attempt = 0; attempt < 50 && !server_; ++attempt) {
      options.port = ephemeral_port();
      if (options.port > 65533) continue;
      try {
        server_ = policy ? std::make_unique<kv::Server>(options, policy()) : std::make_unique<kv::Server>(options);
      } catch (const kv::KvstoreError&) {
        // P + 1 or P + 2 taken: try another block
      }
    }
    if (!server_) throw std::runtime_error("no three free consecutive ports on 127.0.0.1");
    thread_ = std::thread([this] { server_->run(); });
  }
  ~RunningServer() {
    server_->stop();
    thread_.join();
  }
  // A client of this server with the configuration's defaults but a heartbeat of 100 ms.
  kv::ClientOptions client(const std::string& subtree = "") const {
    kv::ClientOptions options = sectorflow::kvstore::client_options(sectorflow::configs::Beamline::defaults(), subtree);
    options.host = "127.0.0.1";
    options.port = server_->options().port;
    options.heartbeat_ms = 100;
    options.silence_heartbeats = 3;
    return options;
  }
  kv::Server& server() { return *server_; }

 private:
  std::unique_ptr<kv::Server> server_;
  std::thread thread_;
};

// KVSETs written by hand with cppzmq on a PUB to P + 2, as a careless or hostile peer sends them.
class RawWriter {
 public:
  explicit RawWriter(std::uint16_t port) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect("tcp://127.0.0.1:" + std::to_string(port + 2));
  }
  void kvset(const std::string& key, const std::string& body, const std::string& properties = "") {
    const std::string sequence(8, '\0');
    const std::vector<zmq::const_buffer> frames{zmq::buffer(key), zmq::buffer(sequence), zmq::const_buffer(),
                                                zmq::buffer(properties), zmq::buffer(body)};
    zmq::send_multipart(socket_, frames);
  }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_{context_, zmq::socket_type::pub};
};

// A msgpack str of `bytes` characters (at most 65535), packed by hand.
std::string packed_string(std::size_t bytes) {
  std::string body = "\xda";  // str 16: a big-endian 16-bit length follows
  body += static_cast<char>((bytes >> 8) & 0xff);
  body += static_cast<char>(bytes & 0xff);
  return body + std::string(bytes, 's');
}

}  // namespace

TEST(KvMsg, GoldenKvpubDecodes) {
  const kv::KvMsg msg = decode(golden_frames("kvmsg_kvpub.frames"));
  EXPECT_EQ(msg.key, "status/producer/r0t0");
  EXPECT_EQ(msg.sequence, 1234567890123);
  EXPECT_EQ(msg.uuid.size(), kv::kUuidBytes);
  EXPECT_DOUBLE_EQ(msg.ttl_s(), 2.5);
  EXPECT_NO_THROW(kv::check_msgpack(msg.body));
  EXPECT_EQ(kv::encode_kvmsg(msg), golden_frames("kvmsg_kvpub.frames"));
}

TEST(KvMsg, GoldenKthxbaiCarriesSequenceAndSubtree) {
  const kv::KvMsg msg = decode(golden_frames("kvmsg_kthxbai.frames"));
  EXPECT_EQ(msg.key, kv::kSnapshotEnd);
  EXPECT_EQ(msg.sequence, 42);
  EXPECT_EQ(msg.body, "status/");
}

TEST(KvMsg, ShortSequenceIsRejectedNamingTheKey) {
  std::vector<std::string> frames = golden_frames("kvmsg_kvpub.frames");
  frames[kv::kFrameSequence].resize(4);
  try {
    decode(frames);
    FAIL() << "a 4-byte sequence was accepted";
  } catch (const kv::KvstoreError& error) {
    EXPECT_NE(std::string(error.what()).find("kvmsg 'status/producer/r0t0': sequence frame of 4 bytes, expected 8"),
              std::string::npos);
  }
}

TEST(KvMsg, KeysMustBeUtf8) {
  EXPECT_NO_THROW(kv::check_key("status/\xc3\xa9t\xc3\xa9/x"));
  for (const std::string key : {"status/\xff/x", "status/\xc0\x80/x", "status/\xed\xa0\x80/x"}) {
    try {
      kv::check_key(key);
      FAIL() << "accepted a key that is not UTF-8";
    } catch (const kv::KvstoreError& error) {
      EXPECT_NE(std::string(error.what()).find("key is not valid UTF-8; keys are text"), std::string::npos);
    }
  }
}

TEST(ClientServer, RegistrationReachesAnotherReplicaAndLeavesWithTheClient) {
  RunningServer running;
  kv::Client watcher(running.client(std::string(sp::kNodegroupsPrefix)));
  std::mutex mutex;
  std::vector<std::pair<std::string, bool>> changes;
  watcher.on_change("", [&](const std::string& key, const std::optional<std::string>& value) {
    const std::lock_guard<std::mutex> lock(mutex);
    changes.emplace_back(key, value.has_value());
  });
  ASSERT_TRUE(watcher.wait_synced(10s));

  const sp::NodeGroupRecord record{"ng-1", "127.0.0.1", {6200, 6201}, "node0", 0,
                                   std::string(sp::to_string(sp::ServiceState::kIdle)), ""};
  {
    kv::Client nodegroup(running.client());
    nodegroup.set(sp::nodegroup_key(record.uid), record.encode(), 1.0);
    const sp::ServiceStatus idle{std::string(sp::to_string(sp::ServiceState::kIdle)), 0, 0, 0, 0.0, {}};
    nodegroup.set(sp::status_key(sp::kServiceNodegroup, record.uid), idle.encode());
    ASSERT_TRUE(wait_for([&] { return watcher.get(sp::nodegroup_key(record.uid)).has_value(); }));
    const auto groups = sp::nodegroups_from(watcher.subtree(std::string(sp::kNodegroupsPrefix))).records;
    ASSERT_EQ(groups.size(), 1u);
    EXPECT_EQ(groups[0], record);
    EXPECT_FALSE(watcher.get(sp::status_key(sp::kServiceNodegroup, record.uid)).has_value()) << "outside the subtree";
  }  // the destructor says goodbye
  ASSERT_TRUE(wait_for([&] { return !watcher.get(sp::nodegroup_key(record.uid)).has_value(); }));
  // The replica changes first, then the agent calls back: the deletion's callback may still be on its way.
  const auto changes_seen = [&] {
    const std::lock_guard<std::mutex> lock(mutex);
    return changes.size();
  };
  ASSERT_TRUE(wait_for([&] { return changes_seen() >= 2; }));
  const std::lock_guard<std::mutex> lock(mutex);
  const std::vector<std::pair<std::string, bool>> expected{{"nodegroups/ng-1", true}, {"nodegroups/ng-1", false}};
  EXPECT_EQ(changes, expected);
  EXPECT_EQ(running.server().stats().malformed, 0u);
}

TEST(ClientServer, SetRejectsValuesThatAreNotMsgpack) {
  RunningServer running;
  kv::Client client(running.client());
  EXPECT_THROW(client.set("status/producer/x", "\xc1"), kv::KvstoreError);
  EXPECT_THROW(client.set("status/producer/x", ""), kv::KvstoreError);
  EXPECT_THROW(client.set("HUGZ", sp::AcquireRequest{1, 1, 1, 0.0, std::nullopt, "simulator", {}}.encode()), kv::KvstoreError);
}

TEST(ClientServer, CreateOnceIsTakenOnlyWhileTheKeyIsAbsent) {
  RunningServer running;
  kv::Client watcher(running.client());
  ASSERT_TRUE(watcher.wait_synced(10s));
  // Several clients claim one key at once: the server's one thread takes the first to arrive only.
  const std::string key = "scans/0000000007/claim";
  std::vector<std::unique_ptr<kv::Client>> claimants;
  for (int i = 0; i < 4; ++i) claimants.push_back(std::make_unique<kv::Client>(running.client()));
  for (auto& claimant : claimants) ASSERT_TRUE(claimant->wait_synced(10s));
  for (std::size_t i = 0; i < claimants.size(); ++i) {
    claimants[i]->create_once(key, sp::ServiceStatus{"idle", static_cast<std::uint32_t>(i), 0, 0, 0.0, {}}.encode());
  }
  ASSERT_TRUE(wait_for([&] { return running.server().stats().updates + running.server().stats().creates_refused >= 4; }));
  EXPECT_EQ(running.server().stats().creates_refused, 3u);
  ASSERT_TRUE(wait_for([&] { return watcher.get(key).has_value(); }));
  const std::string winner = *watcher.get(key);
  for (auto& claimant : claimants) {
    ASSERT_TRUE(wait_for([&] { return claimant->get(key).has_value(); }));
    EXPECT_EQ(*claimant->get(key), winner) << "every replica names the one winner";
  }
  // The property is the server's business: the update it publishes carries none but the ttl.
  claimants[0]->erase(key);
  ASSERT_TRUE(wait_for([&] { return !watcher.get(key).has_value(); }));
  claimants[1]->create_once(key, sp::ServiceStatus{"idle", 9, 0, 0, 0.0, {}}.encode());
  ASSERT_TRUE(wait_for([&] { return watcher.get(key).has_value(); }));
  EXPECT_EQ(sp::ServiceStatus::decode(*watcher.get(key)).scan, 9u) << "absent again, so taken again";
  EXPECT_EQ(running.server().stats().creates_refused, 3u);
}

TEST(ServerBounds, RefusalsAreCountedByKindWithTheFirstReason) {
  kv::ServerOptions options = default_server_options();
  options.max_value_bytes = 1024;
  options.max_ttl_s = 60.0;
  options.max_keys = 3;
  RunningServer running(options);
  kv::Server& server = running.server();
  RawWriter writer(server.options().port);
  // A PUB drops what it sends before the server's subscription arrives: send until one is taken.
  ASSERT_TRUE(wait_for([&] {
    writer.kvset("probe", "\x01");
    return server.stats().updates >= 1;
  }));
  writer.kvset("big", packed_string(1500));                 // above max_value_bytes
  writer.kvset("long", "\x01", "ttl=1e10\n");               // clamped, kept
  writer.kvset("k1", "\x01");                               // the third key: the map is full then
  writer.kvset("k2", "\x01");                               // refused
  writer.kvset("probe", "\x02");                            // a refresh of a key held: never refused
  writer.kvset(sp::status_key("kvstore", "server"), "\x01");  // the server's own key: malformed
  // One connection delivers in order: once the last is counted, every one before it was handled.
  ASSERT_TRUE(wait_for([&] { return server.stats().malformed == 1; }));

  const kv::ServerStats stats = server.stats();
  EXPECT_EQ(stats.oversized, 1u);
  EXPECT_EQ(stats.ttl_clamped, 1u);
  EXPECT_EQ(stats.refused_full, 1u);
  EXPECT_EQ(stats.refused_quota, 0u);
  EXPECT_EQ(stats.errors, 0u);
  EXPECT_EQ(stats.keys, 4u);  // probe, long, k1 and the server's status
  EXPECT_EQ(stats.refusals("refused_full"), 1u);
  EXPECT_THROW(stats.refusals("nonsense"), kv::KvstoreError);
  EXPECT_EQ(stats.first_refusals.at("oversized"),
            "update from 127.0.0.1: kvmsg 'big': value of 1503 bytes, at most 1024 ([kvstore] max_value_bytes)");
  EXPECT_EQ(stats.first_refusals.at("ttl_clamped"),
            "update from 127.0.0.1: kvmsg 'long': ttl 1e10 s clamped to 60.000000 s ([kvstore] max_ttl_s)");
  EXPECT_NE(stats.first_refusals.at("refused_full").find("kvmsg 'k2' refused: kvstore full: the map holds 3 keys"),
            std::string::npos);
  EXPECT_NE(stats.last_malformed.find("this key belongs to the server"), std::string::npos);
}

// Once, a flood of other keys filled the map and the stack's scan records were refused. Scan
// records have a room of their own; when it is full the oldest scan goes, never the one being
// written, and only a scan that alone fills the room is refused.
TEST(ServerBounds, ScanRecordsHaveTheirOwnRoomAndTheOldestScanGoesFirst) {
  kv::ServerOptions options = default_server_options();
  options.max_keys = 3;
  options.max_keys_per_address = 3;
  options.max_stack_keys = 4;
  RunningServer running(options);
  kv::Server& server = running.server();
  kv::Client watcher(running.client(std::string(sp::kScansPrefix)));
  ASSERT_TRUE(watcher.wait_synced(10s));
  RawWriter writer(server.options().port);
  ASSERT_TRUE(wait_for([&] {
    writer.kvset("flood/0", "\x01");
    return server.stats().updates >= 1;
  }));
  for (int i = 1; i < 6; ++i) writer.kvset("flood/" + std::to_string(i), "\x01");  // 3 taken, 3 refused
  writer.kvset(sp::scan_request_key(1), "\x01");
  writer.kvset(sp::scan_file_key(1), "\x01");
  writer.kvset(sp::scan_request_key(2), "\x01");
  writer.kvset(sp::scan_file_key(2), "\x01");
  writer.kvset(sp::scan_request_key(3), "\x01");  // the room holds 4: scan 1, the oldest, goes
  ASSERT_TRUE(wait_for([&] { return watcher.get(sp::scan_request_key(3)).has_value(); }));
  EXPECT_EQ(server.stats().scans_evicted, 1u);
  EXPECT_EQ(server.stats().refused_full + server.stats().refused_quota, 3u);
  EXPECT_EQ(watcher.subtree(sp::scan_prefix(1)).size(), 0u);
  EXPECT_EQ(watcher.subtree(sp::scan_prefix(2)).size(), 2u);

  // Scan 3 grows: scan 2 goes, then scan 3 alone fills the room and its fifth key is refused.
  for (const char* part : {"file", "producer/r0t0", "aggregator/t0"}) {
    writer.kvset(sp::scan_prefix(3) + part, "\x01");
  }
  writer.kvset(sp::scan_prefix(3) + "nodegroup/ng-1", "\x01");
  writer.kvset("probe", "\x01");  // refused too (the map is full), but counted after the rest
  ASSERT_TRUE(wait_for([&] { return server.stats().refused_full + server.stats().refused_quota == 5; }));
  EXPECT_EQ(server.stats().scans_evicted, 2u);
  EXPECT_EQ(watcher.subtree(sp::scan_prefix(2)).size(), 0u);
  const auto scan3 = watcher.subtree(sp::scan_prefix(3));
  EXPECT_EQ(scan3.size(), 4u);
  EXPECT_EQ(scan3.count(sp::scan_prefix(3) + "nodegroup/ng-1"), 0u);
  EXPECT_NE(server.stats().first_refusals.at("refused_full").find("kvstore full: the stack"),
            std::string::npos);
}

// The parts of a whole 4 x 4 scan of one receiver and one producer thread, as its services write them.
std::vector<std::pair<std::string, std::string>> finished_scan(std::uint32_t scan) {
  sp::ScanRequestRecord request;
  request.scan_number = scan;
  request.scan_x = request.scan_y = 4;
  request.source = "simulator";
  request.routing = {"ng-a"};
  request.producer_threads = {1};
  sp::ProducerScanRecord producer;
  producer.state = "finished";
  producer.routing = {"ng-a"};
  producer.counts = {{"ng-a", 16}};
  producer.owned = producer.sent = 16;
  sp::ScanFileRecord file;
  file.outcome = "complete";
  file.path = "/data/scan.h5";
  file.positions = file.frames_written = 16;
  file.sectors_counted = {16};
  return {{sp::scan_request_key(scan), request.encode()},
          {sp::scan_producer_key(scan, 0, 0), producer.encode()},
          {sp::scan_file_key(scan), file.encode()}};
}

TEST(ServerFold, AFinishedScanBecomesOneSummaryNoClientMayWriteAndPastScansKeptTheOldestGoes) {
  kv::ServerOptions options = default_server_options();
  options.scans_kept = 2;
  RunningServer running(options);
  kv::Server& server = running.server();
  kv::Client watcher(running.client(std::string(sp::kScansPrefix)));
  ASSERT_TRUE(watcher.wait_synced(10s));
  RawWriter writer(server.options().port);
  const std::string summary1 = sp::scan_prefix(1) + "summary";
  // A running scan (its producer not finished) is never folded, nor erased by the retention.
  auto running_parts = finished_scan(9);
  running_parts.pop_back();
  sp::ProducerScanRecord streaming = sp::ProducerScanRecord::decode(running_parts[1].second);
  streaming.state = "streaming";
  running_parts[1].second = streaming.encode();
  ASSERT_TRUE(wait_for([&] {
    for (const auto& [key, body] : running_parts) writer.kvset(key, body);
    return watcher.subtree(sp::scan_prefix(9)).size() == 2;
  }));
  for (std::uint32_t scan = 1; scan <= 4; ++scan) {
    for (const auto& [key, body] : finished_scan(scan)) writer.kvset(key, body);
    ASSERT_TRUE(wait_for([&] {
      return watcher.subtree(sp::scan_prefix(scan)).size() == 1 && watcher.get(sp::scan_prefix(scan) + "summary");
    })) << scan;
    if (scan == 1) {
      EXPECT_EQ(watcher.subtree(sp::scan_prefix(1)).begin()->first, summary1);
      writer.kvset(summary1, "\x01");  // a client's summary, whatever it says
      ASSERT_TRUE(wait_for([&] { return server.stats().refused_fold == 1; }));
    }
  }
  // The counters change after the updates are published.
  ASSERT_TRUE(wait_for([&] { return server.stats().summaries_dropped == 2; }));
  EXPECT_EQ(server.stats().scans_folded, 4u);
  EXPECT_TRUE(watcher.subtree(sp::scan_prefix(1)).empty());
  EXPECT_TRUE(watcher.subtree(sp::scan_prefix(2)).empty());
  EXPECT_TRUE(watcher.get(sp::scan_prefix(4) + "summary").has_value());
  EXPECT_EQ(watcher.subtree(sp::scan_prefix(9)).size(), 2u);
  EXPECT_NE(server.stats().first_refusals.at("refused_fold").find("only the kvstore server writes"),
            std::string::npos);
}

namespace {

// Another stack's policy: its records under jobs/<id>/, each job a group folded into
// jobs/<id>/folded (a msgpack count of the keys it replaced) once jobs/<id>/end is written.
class JobsPolicy final : public kv::StackPolicy {
 public:
  bool reserved(const std::string& key) const override { return key.rfind("jobs/", 0) == 0; }
  std::string group_of(const std::string& key) const override {
    const std::size_t slash = key.find('/', 5);
    return reserved(key) && slash != std::string::npos ? key.substr(0, slash + 1) : std::string();
  }
  std::string fold_key(const std::string& group) const override { return group + "folded"; }
  std::optional<std::string> fold(const std::string& group, const kv::StoreView& map) const override {
    if (!map.find(group + "end")) return std::nullopt;
    char keys = 0;
    map.visit(group, [&keys](const std::string&, const kv::StoreView::Value&) { return ++keys < 100; });
    return std::string(1, keys);  // a msgpack positive fixint
  }
  bool folded(const std::string&, const kv::StoreView&) const override { return false; }
  bool keeps_live_keys(const std::string&, const kv::StoreView&) const override { return false; }
  std::string server_only(const std::string& key) const override {
    return key.size() > 7 && key.compare(key.size() - 7, 7, "/folded") == 0 ? "a job's fold is the server's" : "";
  }
  std::string write_refusal(const std::string&, const std::string&, const std::string&, bool,
                            const kv::StoreView&) const override {
    return {};
  }
  bool votes(const std::string&) const override { return true; }
};

}  // namespace

TEST(ServerPolicy, TheStacksPolicyHandedInDecidesItsRoomItsGroupsAndTheirFold) {
  RunningServer running(default_server_options(), [] { return std::make_unique<const JobsPolicy>(); });
  kv::Server& server = running.server();
  kv::Client watcher(running.client());
  ASSERT_TRUE(watcher.wait_synced(10s));
  RawWriter writer(server.options().port);
  // The store knows no scans now: a client's scans/<n>/summary is a key like any other.
  const std::string summary = sp::scan_prefix(1) + "summary";
  ASSERT_TRUE(wait_for([&] {
    for (const std::string& key : {std::string("jobs/1/a"), std::string("jobs/1/b"), summary}) writer.kvset(key, "\x01");
    return watcher.get("jobs/1/b").has_value() && watcher.get(summary).has_value();
  }));
  writer.kvset("jobs/1/end", "\x01");
  ASSERT_TRUE(wait_for([&] { return watcher.subtree("jobs/1/").size() == 1 && watcher.get("jobs/1/folded"); }));
  EXPECT_EQ(*watcher.get("jobs/1/folded"), std::string(1, '\x03'));  // a, b and end
  EXPECT_EQ(server.stats().scans_folded, 1u);
  writer.kvset("jobs/2/folded", "\x01");
  ASSERT_TRUE(wait_for([&] { return server.stats().refused_fold == 1; }));
  EXPECT_NE(server.stats().first_refusals.at("refused_fold").find("a job's fold is the server's"), std::string::npos);
  EXPECT_FALSE(watcher.get("jobs/2/folded").has_value());
}

TEST(ServerBounds, OptionsOutOfRangeAreRefusedNamingTheOption) {
  const auto refused = [](const std::function<void(kv::ServerOptions&)>& change, const std::string& expected) {
    kv::ServerOptions options = default_server_options();
    options.bind_host = "127.0.0.1";
    options.port = 1;  // never bound: the options are refused first
    change(options);
    try {
      kv::Server server(options);
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const kv::KvstoreError& error) {
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
    }
  };
  refused([](kv::ServerOptions& o) { o.max_keys = 0; }, "max_keys is 0; expected at least 1");
  refused([](kv::ServerOptions& o) { o.scans_kept = 0; }, "scans_kept is 0; expected at least 1");
  refused([](kv::ServerOptions& o) { o.max_value_bytes = 16; }, "max_value_bytes 16 out of range");
  refused([](kv::ServerOptions& o) { o.max_ttl_s = std::nan(""); }, "max_ttl_s nan out of range");
  refused([](kv::ServerOptions& o) { o.max_ttl_s = 2e9; }, "at most 1e9 seconds");
}
