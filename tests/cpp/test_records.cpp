// The kvstore records (protocol/records.hpp, kvstore/SPEC.md "Keys and records"): golden bytes
// decoded here and in tests/unit/test_kvstore_schema.py, the bounds encoders and decoders share,
// and list readers that skip what does not decode.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/records.hpp"

namespace sp = sectorflow::protocol;

namespace {

std::string golden(const std::string& name) {
  std::ifstream in(std::string(SECTORFLOW_TEST_DATA) + "/" + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open golden file " + name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(Records, GoldenRecordsRoundTrip) {
  const std::string nodegroup = golden("nodegroup_record_v1.msgpack");
  const sp::NodeGroupRecord record = sp::NodeGroupRecord::decode(nodegroup);
  EXPECT_EQ(record.uid, "ng-0001");
  EXPECT_EQ(record.ports, (std::vector<std::uint16_t>{6200, 6201, 6202, 6203}));
  EXPECT_EQ(record.endpoint(1), "tcp://10.0.0.7:6201");
  EXPECT_EQ(record.encode(), nodegroup);

  const std::string status = golden("service_status_v1.msgpack");
  const sp::ServiceStatus decoded = sp::ServiceStatus::decode(status);
  EXPECT_EQ(decoded.state, "streaming");
  EXPECT_EQ(std::get<std::int64_t>(decoded.extra.at("expected")), 400);
  EXPECT_EQ(decoded.encode(), status);

  const std::string request = golden("acquire_request_v1.msgpack");
  EXPECT_EQ(sp::AcquireRequest::decode(request), (sp::AcquireRequest{17, 128, 64, 1000.0, std::nullopt, "simulator", {}}));
  EXPECT_EQ(sp::AcquireRequest::decode(request).encode(), request);

  const std::string routed = golden("acquire_request_v1_routing.msgpack");
  const sp::AcquireRequest with_routing{18, 8, 4, 250.0, std::vector<std::string>{"ng-a", "ng-b"}, "replay"};
  EXPECT_EQ(sp::AcquireRequest::decode(routed), with_routing);
  EXPECT_EQ(with_routing.encode(), routed);
}


TEST(Records, MissingFieldIsNamed) {
  try {
    sp::NodeGroupRecord::decode(sp::AcquireRequest{1, 1, 1, 0.0, std::nullopt, "simulator", {}}.encode());
    FAIL() << "an acquire request decoded as a NodeGroup";
  } catch (const sp::ProtocolError& error) {
    EXPECT_NE(std::string(error.what()).find("NodeGroupRecord: missing field 'uid'"), std::string::npos);
  }
}


TEST(Records, EncodersAndDecodersShareTheBounds) {
  sp::NodeGroupRecord record{"ng-1", "127.0.0.1", std::vector<std::uint16_t>(sp::kMaxPorts + 1, 6200), "n", 0, "idle",
                             ""};
  EXPECT_THROW(record.encode(), sp::ProtocolError);
  record.ports.resize(sp::kMaxPorts);
  EXPECT_EQ(sp::NodeGroupRecord::decode(record.encode()), record);

  sp::AcquireRequest request;
  request.scan_number = 1;
  request.scan_x = sp::kMaxScanSide + 1;
  request.scan_y = 1;
  try {
    request.encode();
    FAIL() << "a scan side of 65536 was encoded";
  } catch (const sp::ProtocolError& error) {
    EXPECT_STREQ(error.what(), "AcquireRequest scan 1: field 'scan_x': 65536 positions, expected at most 65535");
  }
}


TEST(Records, NodeGroupsFromSkipsWhatDoesNotDecodeAndSaysWhy) {
  const sp::NodeGroupRecord a{"a", "127.0.0.1", {6200}, "n", 0, "idle", ""};
  const sp::NodeGroupRecord b{"b", "127.0.0.1", {6300}, "n", 1, "idle", ""};
  const sp::NodeGroupList list = sp::nodegroups_from({{"nodegroups/b", b.encode()},
                                                      {"nodegroups/a", a.encode()},
                                                      {"nodegroups/x", "\x93\x01\x02\x03"},
                                                      {"nodegroups/y", a.encode()}});
  EXPECT_EQ(list.records, (std::vector<sp::NodeGroupRecord>{a, b}));
  const std::map<std::string, std::string> rejected{
      {"nodegroups/x", "NodeGroupRecord: expected a msgpack map, got an array"},
      {"nodegroups/y", "holds the record of uid 'a'"}};
  EXPECT_EQ(list.rejected, rejected);
}



namespace {

// `record`'s encoding (no stack_id: a fixmap of 7 fields) with stack_id = `value` (msgpack bytes) added.
std::string with_stack_field(const sp::NodeGroupRecord& record, const std::string& value) {
  std::string bytes = record.encode();
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x87U);
  bytes[0] = static_cast<char>(0x88);
  return bytes + "\xa8stack_id" + value;
}

std::string decode_error(const std::string& bytes) {
  try {
    sp::NodeGroupRecord::decode(bytes);
  } catch (const sp::ProtocolError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST(Records, NodeGroupStackIdIsOptionalBoundedAndChecked) {
  // Good: the golden record with the field (written by msgpack itself, not by this encoder).
  const std::string golden_stack = golden("nodegroup_record_v1_stack.msgpack");
  const sp::NodeGroupRecord stacked = sp::NodeGroupRecord::decode(golden_stack);
  EXPECT_EQ(stacked.stack_id, "0123456789abcdef");
  EXPECT_EQ(stacked.encode(), golden_stack);
  // Absent: a record of the original fields is one of no known stack, and encodes to the original bytes.
  sp::NodeGroupRecord plain = sp::NodeGroupRecord::decode(golden("nodegroup_record_v1.msgpack"));
  EXPECT_EQ(plain.stack_id, "");
  EXPECT_FALSE(plain == stacked);
  plain.stack_id = stacked.stack_id;
  EXPECT_EQ(plain, stacked);

  const sp::NodeGroupRecord record{"ng-1", "127.0.0.1", {6200}, "n", 0, "idle", ""};
  EXPECT_EQ(sp::NodeGroupRecord::decode(with_stack_field(record, "\xb0" "fedcba9876543210")).stack_id,
            "fedcba9876543210");
  // Wrong type, too long, not a stack id, empty.
  EXPECT_EQ(decode_error(with_stack_field(record, "\x07")),
            "NodeGroupRecord 'ng-1': field 'stack_id': expected a string, got an unsigned integer");
  EXPECT_EQ(decode_error(with_stack_field(record, "\xb1" "0123456789abcdef0")),
            "NodeGroupRecord 'ng-1': field 'stack_id': a string of 17 bytes, expected at most 16");
  EXPECT_EQ(decode_error(with_stack_field(record, "\xd9\xff" + std::string(255, 'a'))),
            "NodeGroupRecord 'ng-1': field 'stack_id': a string of 255 bytes, expected at most 16");
  EXPECT_EQ(decode_error(with_stack_field(record, "\xb0" "0123456789ABCDEF")),
            "NodeGroupRecord 'ng-1': field 'stack_id': '0123456789ABCDEF' is not a stack id (16 lowercase hex digits)");
  EXPECT_EQ(decode_error(with_stack_field(record, "\xa0")),
            "NodeGroupRecord 'ng-1': field 'stack_id': empty; a writer that knows no stack leaves the field out");
  // The encoder refuses what the decoder would.
  sp::NodeGroupRecord bad = record;
  bad.stack_id = "not a stack";
  EXPECT_THROW(bad.encode(), sp::ProtocolError);
}
