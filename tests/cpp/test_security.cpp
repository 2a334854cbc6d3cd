// sectorflow::security (certificates, a ZAP handler refusing and admitting keys over real
// sockets) and the kvstore's write policy (kvstore/src/write_policy.hpp, kvstore/SPEC.md "Security").
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "sectorflow/security/certificate.hpp"
#include "sectorflow/security/curve.hpp"
#include "sectorflow/security/errors.hpp"
#include "sectorflow/security/zap_handler.hpp"
#include "write_policy.hpp"

namespace security = sectorflow::security;
using sectorflow::kvstore::detail::status_refusal;
using sectorflow::kvstore::detail::write_refusal;

namespace {

std::string file_with(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

// Whether a PUSH holding `client` reaches a PULL bound with `server` and a ZAP handler admitting
// `server.peers`: the message arrives, or (refused) the PULL's monitor sees the handshake fail.
bool delivered(const security::CurveServer& server, const security::CurveClient& client) {
  zmq::context_t context;
  security::ZapHandler zap(context, {server});
  zmq::socket_t pull(context, zmq::socket_type::pull);
  pull.set(zmq::sockopt::linger, 0);
  security::apply(pull, server);
  pull.bind("tcp://127.0.0.1:*");
  zmq::socket_t push(context, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, 0);
  security::apply(push, client);
  push.connect(pull.get(zmq::sockopt::last_endpoint));
  push.send(zmq::str_buffer("sector"), zmq::send_flags::dontwait);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::message_t message;
    if (pull.recv(message, zmq::recv_flags::dontwait)) return true;
    if (zap.stats().refused > 0) return false;
    zmq::pollitem_t item{pull.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "neither delivered nor refused";
  return false;
}

}  // namespace

TEST(Certificate, ReadsZeroMqsFormatAndRefusesWhatIsNotAKey) {
  const security::Certificate pair = security::generate_keypair();
  const std::string secret = file_with("sf_test.key_secret", "#   comment\nmetadata\ncurve\n    public-key = \"" +
                                                                  pair.public_key + "\"\n    secret-key = \"" +
                                                                  pair.secret_key + "\"\n");
  const security::Certificate read = security::read_certificate(secret);
  EXPECT_EQ(read.public_key, pair.public_key);
  EXPECT_EQ(read.secret_key, pair.secret_key);
  const std::string bad = file_with("sf_bad.key", "curve\n    public-key = \"not a key\"\n");
  EXPECT_THROW(security::read_certificate(bad), security::SecurityError);
  EXPECT_THROW(security::read_certificate("/nonexistent/x.key"), security::SecurityError);
  std::filesystem::remove(secret);
  std::filesystem::remove(bad);
}

TEST(ZapHandler, AdmitsAllowedKeysAndRefusesOthersOncePerKey) {
  const security::Certificate server_pair = security::generate_keypair();
  const security::Certificate known = security::generate_keypair();
  const security::Certificate stranger = security::generate_keypair();
  security::CurveServer server{server_pair.public_key, server_pair.secret_key, "producers",
                               {{known.public_key, "producer/known"}}};
  EXPECT_TRUE(delivered(server, {known.public_key, known.secret_key, server_pair.public_key}));
  EXPECT_FALSE(delivered(server, {stranger.public_key, stranger.secret_key, server_pair.public_key}));
}

TEST(WritePolicy, EachRoleWritesItsOwnPrefixes) {
  EXPECT_EQ(write_refusal("nodegroup/s", "nodegroups/ng-1", ""), "");
  EXPECT_EQ(write_refusal("producer/r0", "nodegroups/ng-1", ""),
            "only a nodegroup may write nodegroups/..., not producer/r0");
  EXPECT_EQ(write_refusal("nodegroup/b", "nodegroups/ng-1", "nodegroup/a"), "the key is held by nodegroup/a");
  EXPECT_EQ(write_refusal("operator/alice", "acquire/request", "operator/bob"), "");
  EXPECT_NE(write_refusal("viewer/bob", "acquire/request", ""), "");
  EXPECT_EQ(write_refusal("aggregator/a", "scans/0000000001/request", ""), "");
  EXPECT_EQ(write_refusal("operator/alice", "scans/0000000001/claim", "operator/bob"), "");
  EXPECT_EQ(write_refusal("operator/alice", "scans/0000000001/abort", "operator/bob"), "");
  EXPECT_NE(write_refusal("producer/r0", "scans/0000000001/abort", ""), "");
  EXPECT_NE(write_refusal("viewer/bob", "scans/0000000001/claim", ""), "");
  EXPECT_EQ(write_refusal("operator/alice", "scans/0000000001/instrument", "operator/bob"), "");
  EXPECT_NE(write_refusal("nodegroup/ng-a", "scans/0000000001/instrument", ""), "");
  EXPECT_EQ(write_refusal("nodegroup/s", "scans/0000000001/file", "nodegroup/other"), "");
  EXPECT_NE(write_refusal("producer/r0", "scans/0000000001/file", ""), "");
  EXPECT_EQ(write_refusal("producer/r0", "scans/0000000001/producer/r0t0", ""), "");
  EXPECT_NE(write_refusal("producer/r0", "scans/0000000001/aggregator/t0", ""), "");
  EXPECT_NE(write_refusal("producer/r0", "scans/0000000001", ""), "");  // a scan's part, not the scan
  EXPECT_NE(write_refusal("producer/r0", "status/aggregator/t0", ""), "");
  EXPECT_NE(write_refusal("producer/r0", "anything/else", ""), "");
  EXPECT_NE(write_refusal("", "status/producer/r0t0", ""), "");
}

TEST(WritePolicy, AProducerKeyNamedForAReceiverWritesOnlyThatReceiversRecords) {
  // Once, any producer key took every receiver's records, racing the real producers.
  EXPECT_EQ(write_refusal("producer/receiver-2", "scans/0000000001/producer/r2t0", ""), "");
  EXPECT_EQ(write_refusal("producer/receiver-2", "status/producer/r2t1", ""), "");
  EXPECT_EQ(write_refusal("producer/receiver-2", "scans/0000000001/producer/r1t0", ""),
            "a producer key named receiver-2 writes only receiver 2's records (r2t<thread>), not "
            "scans/0000000001/producer/r1t0");
  EXPECT_NE(write_refusal("producer/receiver-2", "scans/0000000001/producer/r21t0", ""), "");  // receiver 21
  EXPECT_NE(write_refusal("producer/receiver-2", "status/producer/r9t0", ""), "");
  EXPECT_NE(write_refusal("producer/receiver-1", "status/producer/r1", ""), "");  // no thread: no record of it
  // A key of another name (one key for several receivers, a test bed's) writes for any of them.
  EXPECT_EQ(write_refusal("producer/receivers", "scans/0000000001/producer/r3t0", ""), "");
  EXPECT_EQ(write_refusal("producer/receiver-x", "status/producer/r3t0", ""), "");
}

TEST(WritePolicy, AProducersStatusNamesAThreadTheStackHas) {
  // Once, one producer key wrote millions of statuses for threads that do not exist.
  const std::vector<std::uint32_t> threads{2, 1};  // receiver 0: two threads, receiver 1: one
  EXPECT_EQ(status_refusal("status/producer/r0t1", threads), "");
  EXPECT_EQ(status_refusal("status/producer/r1t0", threads), "");
  EXPECT_EQ(status_refusal("status/producer/r1t1", threads),
            "receiver 1 has no producer thread 1 (1 threads, [[receivers]] threads)");
  EXPECT_EQ(status_refusal("status/producer/r0t4000000", threads),
            "receiver 0 has no producer thread 4000000 (2 threads, [[receivers]] threads)");
  EXPECT_EQ(status_refusal("status/producer/r2t0", threads), "the stack has no receiver 2 (2 receivers, [[receivers]])");
  EXPECT_NE(status_refusal("status/producer/anything", threads), "");
  EXPECT_NE(status_refusal("status/producer/r0t0x", threads), "");
  // Only producer statuses are judged so.
  EXPECT_EQ(status_refusal("status/aggregator/t9", threads), "");
  EXPECT_EQ(status_refusal("scans/0000000001/producer/r9t9", threads), "");
}

TEST(WritePolicy, ThePairsKvstoreKeyWritesNothing) {
  // A pair's servers admit the kvstore key to mirror each other; no write of it is the peer's.
  for (const char* key : {"nodegroups/ng-1", "status/kvstore/server", "acquire/request", "scans/0000000001/file"}) {
    EXPECT_EQ(write_refusal("kvstore/server", key, ""), "the kvstore key writes nothing: a pair's peer only mirrors "
                                                        "(kvstore/server)")
        << key;
  }
}

TEST(WritePolicy, AViewerWritesOnlyItsOwnLibertemStatus) {
  EXPECT_EQ(write_refusal("viewer/beamline-pc", "status/libertem/beamline-pc", ""), "");
  EXPECT_EQ(write_refusal("operator/alice", "status/libertem/alice", ""), "");  // a host with no viewer key
  EXPECT_EQ(write_refusal("viewer/beamline-pc", "status/libertem/other", ""),
            "a viewer may write only status/libertem/beamline-pc (its own name), not status/libertem/other");
  EXPECT_NE(write_refusal("viewer/beamline-pc", "status/libertem/beamline-pc/more", ""), "");
  EXPECT_EQ(write_refusal("nodegroup/beamline-pc", "status/libertem/beamline-pc", ""),
            "only a viewer or operator may write status/libertem/..., not nodegroup/beamline-pc");
  EXPECT_NE(write_refusal("viewer/beamline-pc", "status/nodegroup/beamline-pc", ""), "");
  EXPECT_NE(write_refusal("viewer/beamline-pc", "status/kvstore/server", ""), "");
  EXPECT_NE(write_refusal("", "status/libertem/beamline-pc", ""), "");
}

TEST(ZapHandler, CountsAPeerWithNoKeyOnAWatchedSocket) {
  const security::Certificate server_pair = security::generate_keypair();
  const security::CurveServer server{server_pair.public_key, server_pair.secret_key, "producers", {}};
  zmq::context_t context;
  zmq::socket_t pull(context, zmq::socket_type::pull);
  pull.set(zmq::sockopt::linger, 0);
  security::ZapHandler zap(context, {server}, {&pull});
  security::apply(pull, server);
  pull.bind("tcp://127.0.0.1:*");
  zmq::socket_t plain(context, zmq::socket_type::push);  // no key: another mechanism
  plain.set(zmq::sockopt::linger, 0);
  plain.connect(pull.get(zmq::sockopt::last_endpoint));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (zap.stats().refused == 0 && std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{pull.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(20));
  }
  EXPECT_GE(zap.stats().refused, 1u);
  plain.close();
  const std::vector<std::string> lines = zap.take_refusals();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("refused a peer on tcp://127.0.0.1:", 0), 0u) << lines[0];
}
