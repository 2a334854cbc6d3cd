// The C++ side of the golden-bytes contract: tests/data/*.bin are decoded here and in
// tests/unit/test_protocol.py, so both languages agree on the wire.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/info_message.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace sp = sectorflow::protocol;

namespace {

std::string golden(const std::string& name) {
  std::ifstream in(std::string(SECTORFLOW_TEST_DATA) + "/" + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open golden file " + name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

sp::DataHeader golden_header() { return sp::DataHeader{7, 5001234, 3, 128, 64, 82, 9, 2}; }

}  // namespace

TEST(DataHeader, GoldenBytesDecode) {
  const std::string bytes = golden("data_header_v2.bin");
  EXPECT_EQ(sp::decode_header(bytes.data(), bytes.size()), golden_header());
  const sp::FrameRef ref = sp::peek_frame(bytes.data(), bytes.size());
  EXPECT_EQ(ref.scan_number, 7u);
  EXPECT_EQ(ref.frame_number, 5001234u);
}

TEST(DataHeader, EncodesToGoldenBytes) { EXPECT_EQ(sp::encode_header(golden_header()), golden("data_header_v2.bin")); }

TEST(DataHeader, RejectsTruncatedHeader) {
  const std::string bytes = golden("data_header_v2.bin");
  EXPECT_THROW(sp::decode_header(bytes.data(), bytes.size() - 1), sp::ProtocolError);
}

namespace {

// A data header written by hand: `tag` opens the array, each field is its bytes as given.
std::string hand_header(const std::string& array_tag, const std::vector<std::string>& fields) {
  std::string out = array_tag;
  for (const std::string& field : fields) out += field;
  return out;
}

std::string header_error(const std::string& bytes) {
  try {
    (void)sp::decode_header(bytes.data(), bytes.size());
  } catch (const sp::ProtocolError& error) {
    return error.what();
  }
  return "accepted";
}

}  // namespace

// Every encoding msgpack allows for the header's array and integers decodes to the same header
// (the hot path reads the common ones itself, msgpack-c the rest), and every near miss gets the
// general reader's error.
TEST(DataHeader, DecodesEveryIntegerEncodingAlike) {
  // version 2, scan 7, frame 5001234, sector 3, 128 x 64, position (82, 9), thread 2
  const std::vector<std::string> widest = {
      std::string("\xcf\0\0\0\0\0\0\0\x02", 9), std::string("\xce\0\0\0\x07", 5),
      std::string("\xce\0\x4c\x50\x12", 5),      std::string("\xcd\0\x03", 3),
      std::string("\xcc\x80", 2),                   std::string("\xcf\0\0\0\0\0\0\0\x40", 9),
      std::string("\xcd\0\x52", 3),                std::string("\x09", 1),
      std::string("\xce\0\0\0\x02", 5)};
  EXPECT_EQ(sp::decode_header(hand_header("\x99", widest).data(), hand_header("\x99", widest).size()),
            golden_header());
  const std::string array16 = hand_header(std::string("\xdc\0\x09", 3), widest);
  EXPECT_EQ(sp::decode_header(array16.data(), array16.size()), golden_header());
  const std::string array32 = hand_header(std::string("\xdd\0\0\0\x09", 5), widest);
  EXPECT_EQ(sp::decode_header(array32.data(), array32.size()), golden_header());

  // Version 3 (the relay's, with its run) takes the same path with a tenth field.
  std::vector<std::string> with_run = widest;
  with_run[0] = std::string("\x03", 1);
  with_run.emplace_back("\xce\0\0\0\x2a", 5);
  sp::DataHeader expected_run = golden_header();
  expected_run.run = 42;
  EXPECT_EQ(sp::decode_header(hand_header("\x9a", with_run).data(), hand_header("\x9a", with_run).size()),
            expected_run);

  const std::string bytes = golden("data_header_v2.bin");
  EXPECT_EQ(header_error(bytes + std::string("\0", 1)), "data header: 1 bytes after the msgpack object");
  EXPECT_EQ(header_error(bytes.substr(0, bytes.size() - 1)).rfind("data header: not valid msgpack", 0), 0u);
  std::vector<std::string> big = widest;
  big[1] = std::string("\xcf\0\0\0\x01\0\0\0\0", 9);
  EXPECT_EQ(header_error(hand_header("\x99", big)),
            "data header field 'scan_number' (index 1): expected a value below 2^32, got 4294967296");
  std::vector<std::string> negative = widest;
  negative[3] = std::string("\xff", 1);
  EXPECT_EQ(header_error(hand_header("\x99", negative)),
            "data header field 'sector' (index 3): expected an unsigned integer, got a negative integer");
  EXPECT_EQ(header_error(hand_header("\x98", std::vector<std::string>(widest.begin(), widest.end() - 1))),
            "data header: expected 9 or 10 fields, got 8");
}

TEST(DataHeader, PayloadSizeMustMatchGeometry) {
  const sp::Geometry geometry{576, 576, 144, 576, 2};
  EXPECT_NO_THROW(sp::check_payload(golden_header(), geometry.sector_bytes(), geometry));
  try {
    sp::check_payload(golden_header(), 10, geometry);
    FAIL() << "a 10-byte payload was accepted";
  } catch (const sp::ProtocolError& error) {
    EXPECT_NE(std::string(error.what()).find("scan 7, frame 5001234, sector 3: payload of 10 bytes, expected 165888"),
              std::string::npos);
  }
}

TEST(InfoMessage, GoldenBytesRoundTrip) {
  const std::string bytes = golden("info_v1.bin");
  const sp::InfoMessage info = sp::decode_info(bytes.data(), bytes.size());
  EXPECT_EQ(info.scan_number, 7u);
  EXPECT_EQ(info.receiver, 3u);
  EXPECT_EQ(info.routing, (std::vector<std::string>{"ng-a", "ng-b"}));
  EXPECT_EQ(info.counts.at("ng-a"), 2048u);
  EXPECT_EQ(info.counts.at("ng-b"), 2047u);
  EXPECT_EQ(sp::encode_info(info), bytes);
  EXPECT_EQ(info.run, 0u);  // no "run": none given
}

// What a relay thread sends the NodeGroups: the header (version 3) and the count with its run.
TEST(DataHeader, Version3CarriesTheRun) {
  const std::string bytes = golden("data_header_v3.bin");
  sp::DataHeader expected = golden_header();
  expected.run = 305419896;
  EXPECT_EQ(sp::decode_header(bytes.data(), bytes.size()), expected);
  EXPECT_EQ(sp::encode_header(expected), bytes);
  EXPECT_EQ(sp::peek_frame(bytes.data(), bytes.size()).frame_number, 5001234u);
  EXPECT_EQ(sp::decode_header(golden("data_header_v2.bin").data(), golden("data_header_v2.bin").size()).run, 0u);
  // The version must match the length: 10 fields at version 2, 9 at version 3, 11 at all, refused.
  const auto refused = [](std::string header) {
    try {
      (void)sp::decode_header(header.data(), header.size());
    } catch (const sp::ProtocolError& error) {
      return error.kind() == sp::Refusal::kHeader;
    }
    return false;
  };
  std::string v2_long = bytes;
  v2_long[1] = 2;  // [0x9a, version, ...]: a version-2 header of 10 fields
  EXPECT_TRUE(refused(v2_long));
  const std::string v2 = golden("data_header_v2.bin");
  std::string v3_short = v2;
  v3_short[1] = 3;
  EXPECT_TRUE(refused(v3_short));
  std::string eleven = bytes + std::string(1, '\x01');
  eleven[0] = static_cast<char>(0x9b);
  EXPECT_TRUE(refused(eleven));
  // A run beyond 32 bits is refused like any field.
  std::string wide = bytes.substr(0, bytes.size() - 5) + std::string("\xcf\x00\x00\x00\x01\x00\x00\x00\x00", 9);
  EXPECT_TRUE(refused(wide));
}

TEST(InfoMessage, TheRunRoundTrips) {
  const std::string bytes = golden("info_v1_run.bin");
  const sp::InfoMessage info = sp::decode_info(bytes.data(), bytes.size());
  EXPECT_EQ(info.run, 305419896u);
  EXPECT_EQ(sp::encode_info(info), bytes);
}

namespace {

// The refusal kind a receiving thread would charge `header` (with a payload of `payload_bytes`) to.
sp::Refusal refusal_of(const std::string& header, std::size_t payload_bytes, std::uint64_t max_positions = 1 << 20,
                       std::uint32_t sector = 3) {
  const sp::DataExpectations expect{sp::Geometry{576, 576, 144, 576, 2}, {max_positions}, sector};
  try {
    (void)sp::decode_data(header.data(), header.size(), payload_bytes, expect);
  } catch (const sp::ProtocolError& error) {
    return error.kind();
  }
  throw std::runtime_error("the message was accepted");
}

std::string with(void (*change)(sp::DataHeader&)) {
  sp::DataHeader header = golden_header();
  change(header);
  return sp::encode_header(header);
}

constexpr std::size_t kSector = 144 * 576 * 2;

}  // namespace

TEST(DataMessage, EachRefusalIsChargedToItsKind) {
  EXPECT_EQ(refusal_of("\xc1", kSector), sp::Refusal::kHeader);
  EXPECT_EQ(refusal_of(with([](sp::DataHeader& h) { h.scan_y = 70000; }), kSector), sp::Refusal::kShape);
  EXPECT_EQ(refusal_of(golden("data_header_v2.bin"), kSector, /*max_positions=*/100), sp::Refusal::kShape);
  EXPECT_EQ(refusal_of(with([](sp::DataHeader& h) { h.position_y = 64; }), kSector), sp::Refusal::kPosition);
  EXPECT_EQ(refusal_of(golden("data_header_v2.bin"), kSector, 1 << 20, /*sector=*/1), sp::Refusal::kSector);
  EXPECT_EQ(refusal_of(golden("data_header_v2.bin"), kSector - 2), sp::Refusal::kPayload);
}

TEST(DataMessage, TheFrameNumberIsTheDetectorsCounterNotThePosition) {
  // Version 2: routing and assembly go by the frame counter, placement by the position.
  const std::string header = with([](sp::DataHeader& h) { h.frame_number = 0; });
  const sp::DataExpectations expect{sp::Geometry{576, 576, 144, 576, 2}, {1 << 20}, 3};
  const sp::DataHeader decoded = sp::decode_data(header.data(), header.size(), kSector, expect);
  EXPECT_EQ(decoded.frame_number, 0u);
  EXPECT_EQ(decoded.position(), 9u * 128 + 82);
}

TEST(DataMessage, AHeaderDeclaringAHugeArrayIsRefusedWithoutAllocatingIt) {
  // msgpack array32 of 2^32 - 1 elements in five bytes: without bounds msgpack-c asks for ~100 GB.
  const std::string huge("\xdd\xff\xff\xff\xff", 5);
  EXPECT_EQ(refusal_of(huge, kSector), sp::Refusal::kHeader);
}

TEST(InfoMessage, BoundsAreRefusedAsInfo) {
  const auto refused = [](const std::string& bytes) {
    try {
      (void)sp::decode_info(bytes.data(), bytes.size());
    } catch (const sp::ProtocolError& error) {
      return error.kind() == sp::Refusal::kInfo;
    }
    return false;
  };
  EXPECT_TRUE(refused(std::string("\xdf\xff\xff\xff\xff", 5)));  // map32 of 2^32 - 1 pairs
  sp::InfoMessage info = sp::decode_info(golden("info_v1.bin").data(), golden("info_v1.bin").size());
  info.counts["ng-a"] = 128 * 64;  // with ng-b's 2047, more messages than the scan has positions
  EXPECT_TRUE(refused(sp::encode_info(info)));
  info.counts = {};
  info.routing.assign(sp::kMaxRoutingLength + 1, "ng");
  for (std::size_t i = 0; i < info.routing.size(); ++i) info.routing[i] += std::to_string(100000 + i);
  EXPECT_TRUE(refused(sp::encode_info(info)));
}

TEST(ScanLimits, ShapeChecksSidesAndPositions) {
  EXPECT_NO_THROW(sp::check_scan_shape(65535, 1, {65535}, "scan 1"));
  EXPECT_THROW(sp::check_scan_shape(0, 1, {100}, "scan 1"), sp::ProtocolError);
  EXPECT_THROW(sp::check_scan_shape(65536, 1, {1ULL << 40}, "scan 1"), sp::ProtocolError);
  EXPECT_THROW(sp::check_scan_shape(11, 10, {100}, "scan 1"), sp::ProtocolError);
}
