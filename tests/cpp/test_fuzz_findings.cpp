// What the fuzz targets of tests/fuzz found, pinned as values: each test names the target and the
// finding, and asserts the error the decoder now gives. (The inputs the fuzzer wrote are replayed
// as they are by the CTests <target>_corpus, e.g. fuzz_data_header_corpus, from
// tests/fuzz/regressions/<target>/.)
//
// 1. Every msgpack decoder let a message's header claim any element count: msgpack-c allocates an
//    array or map for the claimed count before reading an element, so a 5 to 13-byte message
//    asked for up to 190 GB (a crash under ASan, an allocation failure or a huge transient
//    reservation without it). Counts and lengths are now bounded by the message's size and
//    nesting by a small depth, so decoding allocates a small multiple of what was received.
// 2. ServiceStatus::decode accepted an empty state, which encode() refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/protocol/scan_records.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/info_message.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace kv = sectorflow::kvstore;
namespace sp = sectorflow::protocol;

namespace {

// msgpack headers that claim 2^32 - 1 elements and bring none.
const std::string kHugeArray("\xdd\xff\xff\xff\xff", 5);
const std::string kHugeMap("\xdf\xff\xff\xff\xff", 5);

// The message of the exception `decode` throws, or "" if it throws none.
template <typename Error, typename Decode>
std::string error_of(Decode decode) {
  try {
    decode();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

std::string protocol_error(const std::string& bytes, sp::DataHeader (*decode)(const void*, std::size_t)) {
  return error_of<sp::ProtocolError>([&] { decode(bytes.data(), bytes.size()); });
}

// A msgpack map of up to 15 pairs, given as their packed keys and values in turn.
std::string map_of(const std::vector<std::string>& keys_and_values) {
  std::string map(1, static_cast<char>(0x80 | (keys_and_values.size() / 2)));
  for (const std::string& part : keys_and_values) map += part;
  return map;
}

// A msgpack string of up to 31 bytes.
std::string str(const std::string& text) { return std::string(1, static_cast<char>(0xa0 | text.size())) + text; }

}  // namespace

TEST(FuzzFindings, DataHeaderClaimingBillionsOfEntriesIsRefusedBeforeAllocating) {
  // fuzz_data_header: an array whose first field claims a map of 2^32 - 1 entries.
  const std::string header = "\x93" + kHugeMap;
  EXPECT_EQ(protocol_error(header, sp::decode_header), "data header: not valid msgpack within its bounds (map size overflow)");
  EXPECT_EQ(error_of<sp::ProtocolError>([&] { sp::peek_frame(header.data(), header.size()); }),
            "data header: not valid msgpack within its bounds (map size overflow)");
  EXPECT_EQ(protocol_error(kHugeArray, sp::decode_header), "data header: not valid msgpack within its bounds (array size overflow)");
}

TEST(FuzzFindings, DataHeaderNestedDeeperThanAnyMessageIsRefused) {
  const std::string nested = std::string(9, '\x91') + '\x01';  // [[[[[[[[[1]]]]]]]]]
  EXPECT_EQ(protocol_error(nested, sp::decode_header), "data header: not valid msgpack within its bounds (depth size overflow)");
  // Within the depth a field of the wrong type is still named as such.
  const std::string shallow = "\x99\x91\x01" + std::string(8, '\x01');
  EXPECT_EQ(protocol_error(shallow, sp::decode_header),
            "data header field 'version' (index 0): expected an unsigned integer, got an array");
}

TEST(FuzzFindings, InfoMessageClaimingBillionsOfEntriesIsRefusedBeforeAllocating) {
  // fuzz_info_message: the root map claims 2^32 - 1 entries.
  EXPECT_EQ(error_of<sp::ProtocolError>([&] { sp::decode_info(kHugeMap.data(), kHugeMap.size()); }),
            "info message: not valid msgpack within its bounds (map size overflow)");
}

TEST(FuzzFindings, TheLimitsLeaveALargeRealMessageAlone) {
  // The longest routing list the contract allows decodes; one more NodeGroup is refused.
  sp::InfoMessage info;
  info.scan_number = 9;
  info.scan_x = info.scan_y = 64;
  for (std::size_t i = 0; i < sp::kMaxRoutingLength; ++i) {
    const std::string uid = "ng-" + std::string(5 - std::to_string(i).size(), '0') + std::to_string(i);
    info.routing.push_back(uid);
    info.counts[uid] = 1;
  }
  const std::string bytes = sp::encode_info(info);
  EXPECT_EQ(sp::decode_info(bytes.data(), bytes.size()), info);
  info.routing.push_back("ng-99999");
  const std::string longer = sp::encode_info(info);
  EXPECT_EQ(error_of<sp::ProtocolError>([&] { sp::decode_info(longer.data(), longer.size()); }),
            "info message: not valid msgpack within its bounds (array size overflow)");
}

TEST(FuzzFindings, KvmsgBodyClaimingBillionsOfElementsIsRefusedWithoutBuildingIt) {
  // fuzz_kvmsg: check_msgpack on a body whose array header claims 2^32 - 1 elements.
  EXPECT_EQ(error_of<kv::KvstoreError>([&] { kv::check_msgpack(kHugeArray); }),
            "body of 5 bytes is not valid msgpack (insufficient bytes)");
  EXPECT_EQ(error_of<kv::KvstoreError>([&] { kv::check_msgpack(std::string("\xc1", 1)); }),
            "body of 1 bytes is not valid msgpack (parse error)");
  EXPECT_EQ(error_of<kv::KvstoreError>([&] { kv::check_msgpack(std::string("\x01\x02", 2)); }),
            "body is not one msgpack object: 1 bytes follow the first object");
  const std::string record = sp::NodeGroupRecord{"a", "h", {1}, "n", 0, "idle", ""}.encode();
  EXPECT_EQ(error_of<kv::KvstoreError>([&] { kv::check_msgpack(record); }), "");
}

TEST(FuzzFindings, SchemaRecordsClaimingBillionsOfEntriesAreRefusedBeforeAllocating) {
  // fuzz_nodegroup_record, fuzz_service_status, fuzz_acquire_request, fuzz_nodegroups_from.
  EXPECT_EQ(error_of<sp::ProtocolError>([&] { sp::NodeGroupRecord::decode(kHugeMap); }),
            "NodeGroupRecord: not valid msgpack within its bounds (map size overflow)");
  EXPECT_EQ(error_of<sp::ProtocolError>([&] { sp::ServiceStatus::decode(kHugeMap); }),
            "ServiceStatus: not valid msgpack within its bounds (map size overflow)");
  EXPECT_EQ(error_of<sp::ProtocolError>([&] { sp::AcquireRequest::decode(kHugeMap); }),
            "AcquireRequest: not valid msgpack within its bounds (map size overflow)");
  // A record whose ports field claims 2^32 - 1 ports.
  const std::string ports = map_of({str("version"), "\x01", str("ports"), kHugeArray});
  EXPECT_EQ(error_of<sp::ProtocolError>([&] { sp::NodeGroupRecord::decode(ports); }),
            "NodeGroupRecord: not valid msgpack within its bounds (array size overflow)");
  // A list reader skips such an entry and says why.
  EXPECT_EQ(sp::nodegroups_from({{"nodegroups/ng-1", ports}}).rejected.at("nodegroups/ng-1"),
            "NodeGroupRecord: not valid msgpack within its bounds (array size overflow)");
}

TEST(FuzzFindings, ServiceStatusWithAnEmptyStateIsRefusedAsEncodeRefusesIt) {
  sp::ServiceStatus status;
  status.state = "idle";
  status.updated_s = 1.5;
  std::string bytes = status.encode();
  const std::string idle = str("idle");
  bytes.replace(bytes.find(idle), idle.size(), str(""));
  EXPECT_EQ(error_of<sp::ProtocolError>([&] { sp::ServiceStatus::decode(bytes); }),
            "ServiceStatus: field 'state': empty state; a status says what the service is doing");
}

TEST(FuzzFindings, ScanRecordWithANotANumberTimeIsRefused) {
  // fuzz_scan_relay: updated_s = NaN decoded, and the record then differed from itself.
  sp::RelayScanRecord record;
  record.thread = 2;
  record.updated_s = 1.0;
  std::string bytes = record.encode();
  const std::string one("\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00", 9);  // float64 1.0
  const std::string nan("\xcb\xff\xff\x5f\x70\x00\x17\x8d\x75", 9);  // the finding's NaN
  ASSERT_NE(bytes.find(one), std::string::npos);
  bytes.replace(bytes.find(one), one.size(), nan);
  EXPECT_EQ(error_of<sp::ProtocolError>([&] { sp::RelayScanRecord::decode(bytes); }),
            "RelayScanRecord: field 'updated_s': not a finite time (NaN or infinite)");
}
