// The scan records (protocol/scan_records.hpp, kvstore/SPEC.md "Scan records"): keys that sort by
// scan, round trips of every record, and the bounds and states their decoders hold them to.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/limits.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/protocol/scan_records.hpp"

namespace sp = sectorflow::protocol;

TEST(ScanRecords, KeysSortByScanAndParseBack) {
  EXPECT_EQ(sp::scan_request_key(12), "scans/0000000012/request");
  EXPECT_EQ(sp::scan_producer_key(12, 3, 1), "scans/0000000012/producer/r3t1");
  EXPECT_EQ(sp::scan_relay_key(12, 2), "scans/0000000012/aggregator/t2");
  EXPECT_EQ(sp::scan_nodegroup_key(12, "ng-1"), "scans/0000000012/nodegroup/ng-1");
  EXPECT_EQ(sp::scan_file_key(4294967295U), "scans/4294967295/file");
  EXPECT_LT(sp::scan_file_key(9), sp::scan_file_key(10));
  EXPECT_EQ(sp::parse_scan_key("scans/0000000012/producer/r3t1"), 12U);
  EXPECT_THROW(sp::parse_scan_key("scans/12/file"), sp::ProtocolError);
  EXPECT_THROW(sp::parse_scan_key("scans/9999999999/file"), sp::ProtocolError);
  EXPECT_THROW(sp::scan_nodegroup_key(1, "a/b"), sp::ProtocolError);
}

TEST(ScanRecords, EveryRecordRoundTrips) {
  const sp::ScanRequestRecord request{7, 128, 64, "simulator", {"ng-a", "ng-b"}, {1, 2, 1, 1}, 1700000000.5};
  EXPECT_EQ(sp::ScanRequestRecord::decode(request.encode()), request);
  EXPECT_EQ(request.sectors(), 128U * 64U * 4U);

  const sp::ProducerScanRecord producer{1,    0,   "finished", {"ng-a", "ng-b"}, {{"ng-a", 10}, {"ng-b", 9}}, 20,
                                        1,    15,  4,          "/raw/data_scan0000000007_module1_0.data.partial",
                                        true, "disk full", 1700000001.0};
  EXPECT_EQ(sp::ProducerScanRecord::decode(producer.encode()), producer);
  EXPECT_EQ(producer.unaccounted(), 0U);

  const sp::RelayScanRecord relay{2, false, {{"ng-a", 100}}, {{"ng-b", 7}}, {"ng-b"}, 1700000002.0};
  EXPECT_EQ(sp::RelayScanRecord::decode(relay.encode()), relay);

  const sp::NodeGroupScanRecord nodegroup{"ng-a", {100, -1}, {100, 3}, 98, 2, 395, 1, 0, true, 1700000003.0};
  EXPECT_EQ(sp::NodeGroupScanRecord::decode(nodegroup.encode()), nodegroup);
  sp::NodeGroupScanRecord runs = nodegroup;
  runs.runs = {{0, 7, 1, 1}, {0, 9, 99, 99}, {1, 0, -1, 3}};
  EXPECT_EQ(sp::NodeGroupScanRecord::decode(runs.encode()), runs);
  EXPECT_GT(runs.encode().size(), nodegroup.encode().size());  // no runs: the record is as before

  const sp::ScanFileRecord file{std::string(sp::kOutcomeIncomplete), "/out/FOURD_0000000007_counted.h5", {}, 8192,
                                8190, 2, {8190, 8190, 8189, 8190}, "2 positions never arrived", 1700000004.0};
  EXPECT_EQ(sp::ScanFileRecord::decode(file.encode()), file);
  EXPECT_EQ(file.total_counted(), 8190U * 3 + 8189U);
}

TEST(ScanRecords, AThreadThatStoppedLeavesItsSectorsUnaccounted) {
  sp::ProducerScanRecord stopped{0, 0, "error", {"ng-a"}, {{"ng-a", 100}}, 100, 2, 60, 0, "", false,
                                 "stopped while waiting at the high-water mark", 1.0};
  EXPECT_EQ(stopped.unaccounted(), 38U);
}

TEST(ScanRecords, DecodersRefuseWhatTheContractDoesNot) {
  const auto refused = [](const auto& decode, const std::string& bytes, const std::string& what) {
    try {
      decode(bytes);
    } catch (const sp::ProtocolError& error) {
      return std::string(error.what()).find(what) != std::string::npos;
    }
    return false;
  };
  sp::ProducerScanRecord producer{0, 0, "finished", {}, {}, 1, 0, 1, 0, "", false, "", 1.0};
  std::string bytes = producer.encode();
  bytes.replace(bytes.find("finished"), 8, "finishes");
  EXPECT_TRUE(refused(sp::ProducerScanRecord::decode, bytes, "is not a service state"));

  sp::ScanFileRecord file{"complete", "/f.h5", {}, 1, 1, 0, {1}, "", 1.0};
  bytes = file.encode();
  bytes.replace(bytes.find("complete"), 8, "whatever");
  EXPECT_TRUE(refused(sp::ScanFileRecord::decode, bytes, "is not complete, incomplete or failed"));
  file.outcome = "fine";
  EXPECT_THROW(file.encode(), sp::ProtocolError);

  sp::RelayScanRecord relay{0, true, {}, {}, {"ng/a"}, 1.0};
  EXPECT_TRUE(refused(sp::RelayScanRecord::decode, relay.encode(), "must be non-empty and hold no '/'"));

  // A run on a port the record does not count, a received count of -1, a run row of 3 fields.
  sp::NodeGroupScanRecord nodegroup{"ng-a", {1, 1}, {1, 1}, 1, 0, 2, 0, 0, false, 1.0, {{2, 5, 1, 1}}};
  EXPECT_TRUE(refused(sp::NodeGroupScanRecord::decode, nodegroup.encode(), "port 2 is not one of the record's 2 ports"));
  nodegroup.runs = {{1, 5, 1, 1}};
  std::string runs = nodegroup.encode();
  runs.back() = static_cast<char>(0xff);  // the last run's received: -1
  EXPECT_TRUE(refused(sp::NodeGroupScanRecord::decode, runs, "received is not a count"));
  runs = nodegroup.encode();
  runs[runs.size() - 5] = static_cast<char>(0x93);  // the run's array of 4 becomes an array of 3
  EXPECT_TRUE(refused(sp::NodeGroupScanRecord::decode, runs.substr(0, runs.size() - 1),
                      "expected an array of 4 integers"));
  nodegroup.runs.assign(sp::kMaxPorts * sp::kMaxRunsPerPort + 1, sp::PortRun{0, 1, 1, 1});
  EXPECT_THROW(nodegroup.encode(), sp::ProtocolError);

  // A request claiming more receivers than a NodeGroup can have ports.
  sp::ScanRequestRecord request{1, 1, 1, "simulator", {}, std::vector<std::uint32_t>(sp::kMaxPorts + 1, 1), 1.0};
  EXPECT_THROW(request.encode(), sp::ProtocolError);
}

namespace {

std::string golden(const std::string& name) {
  std::ifstream in(std::string(SECTORFLOW_TEST_DATA) + "/" + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open golden file " + name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(ScanRecords, GoldenBytesFromAnotherMsgpackDecodeAndEncodeIdentically) {
  // tests/data/scan_*_v1.msgpack were packed by Python's msgpack from plain dicts.
  const std::string request = golden("scan_request_v1.msgpack");
  EXPECT_EQ(sp::ScanRequestRecord::decode(request).producer_threads, (std::vector<std::uint32_t>{1, 2, 1, 1}));
  EXPECT_EQ(sp::ScanRequestRecord::decode(request).encode(), request);
  const std::string producer = golden("scan_producer_v1.msgpack");
  EXPECT_EQ(sp::ProducerScanRecord::decode(producer).sent, 4093U);
  EXPECT_EQ(sp::ProducerScanRecord::decode(producer).encode(), producer);
  const std::string relay = golden("scan_relay_v1.msgpack");
  EXPECT_EQ(sp::RelayScanRecord::decode(relay).forwarded.at("ng-b"), 2045U);
  EXPECT_EQ(sp::RelayScanRecord::decode(relay).encode(), relay);
  EXPECT_EQ(sp::RelayScanRecord::decode(relay).run, 0U);  // a record without a run reads as before
  const std::string relay_run = golden("scan_relay_v1_run.msgpack");
  EXPECT_EQ(sp::RelayScanRecord::decode(relay_run).run, 305419896U);
  EXPECT_EQ(sp::RelayScanRecord::decode(relay_run).encode(), relay_run);
  const std::string nodegroup = golden("scan_nodegroup_v1.msgpack");
  EXPECT_EQ(sp::NodeGroupScanRecord::decode(nodegroup).sectors_counted, 8191U);
  EXPECT_EQ(sp::NodeGroupScanRecord::decode(nodegroup).encode(), nodegroup);
  EXPECT_TRUE(sp::NodeGroupScanRecord::decode(nodegroup).runs.empty());  // a record without runs reads as before
  const std::string nodegroup_runs = golden("scan_nodegroup_v1_runs.msgpack");
  EXPECT_EQ(sp::NodeGroupScanRecord::decode(nodegroup_runs).runs,
            (std::vector<sp::PortRun>{{0, 305419896U, 1, 1}, {0, 2596069104U, 2048, 2048}}));
  EXPECT_EQ(sp::NodeGroupScanRecord::decode(nodegroup_runs).encode(), nodegroup_runs);
  const std::string file = golden("scan_file_v1.msgpack");
  EXPECT_EQ(sp::ScanFileRecord::decode(file).total_counted(), 8192U * 3 + 8189U);
  EXPECT_EQ(sp::ScanFileRecord::decode(file).encode(), file);
}
