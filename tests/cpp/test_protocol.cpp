// The C++ side of the golden-bytes contract: tests/data/*.bin are decoded here and in
// tests/unit/test_protocol.py, so both languages agree on the wire.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/info_message.hpp"

namespace sp = sectorflow::protocol;

namespace {

std::string golden(const std::string& name) {
  std::ifstream in(std::string(SECTORFLOW_TEST_DATA) + "/" + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open golden file " + name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

sp::DataHeader golden_header() { return sp::DataHeader{7, 1234, 3, 128, 64, 82, 9, 2}; }

}  // namespace

TEST(DataHeader, GoldenBytesDecode) {
  const std::string bytes = golden("data_header_v1.bin");
  EXPECT_EQ(sp::decode_header(bytes.data(), bytes.size()), golden_header());
  const sp::FrameRef ref = sp::peek_frame(bytes.data(), bytes.size());
  EXPECT_EQ(ref.scan_number, 7u);
  EXPECT_EQ(ref.frame_number, 1234u);
}

TEST(DataHeader, EncodesToGoldenBytes) { EXPECT_EQ(sp::encode_header(golden_header()), golden("data_header_v1.bin")); }

TEST(DataHeader, RejectsTruncatedHeader) {
  const std::string bytes = golden("data_header_v1.bin");
  EXPECT_THROW(sp::decode_header(bytes.data(), bytes.size() - 1), sp::ProtocolError);
}

TEST(DataHeader, PayloadSizeMustMatchGeometry) {
  const sp::Geometry geometry{576, 576, 144, 576, 2};
  EXPECT_NO_THROW(sp::check_payload(golden_header(), geometry.sector_bytes(), geometry));
  try {
    sp::check_payload(golden_header(), 10, geometry);
    FAIL() << "a 10-byte payload was accepted";
  } catch (const sp::ProtocolError& error) {
    EXPECT_NE(std::string(error.what()).find("scan 7, frame 1234, sector 3: payload of 10 bytes, expected 165888"),
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
}
