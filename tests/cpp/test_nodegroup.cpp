// A NodeGroup fed over real TCP PUSH sockets on 127.0.0.1 (ports chosen by the OS), as the
// aggregator's threads feed it: its receiver threads decode and check each message, its two
// counting threads share the scan's threshold sample and count the frames. Under ThreadSanitizer
// (`make sanitize`) this is the test that runs those threads against each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "sectorflow/consumer/nodegroup/nodegroup.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/info_message.hpp"

namespace sc = sectorflow::consumer::nodegroup;
namespace sp = sectorflow::protocol;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t kScan = 4;
constexpr std::uint32_t kScanX = 4;
constexpr std::uint32_t kScanY = 2;
constexpr std::uint32_t kFrames = kScanX * kScanY;
constexpr std::uint32_t kCols = 16;
// How long a test waits for a condition before it fails: a deadline, not a speed expectation.
constexpr auto kDeadline = 60s;
const std::string kUid = "ng-test";

// 16 x 16 pixels in two sectors of 8 x 16: aggregator thread r delivers sector r.
sc::NodeGroupSettings settings() {
  sc::NodeGroupSettings s;
  s.uid = kUid;
  s.host = "127.0.0.1";
  s.geometry = {16, kCols, 8, kCols, 2};
  s.receivers = 2;
  s.producer_threads = {1, 1};
  s.counting_threads = 2;
  s.recv_hwm = 1000;
  s.pool_frames = 8;
  s.scan_timeout_s = 600.0;  // a scan that never completes fails the test by its deadline instead
  // The counting threads share one sample, decided mid-scan; the frames below are made for these sigmas.
  s.thresholds = {3, 4.5, 175.0, 0.0, 0.0};
  s.limits.max_positions = 1024;
  s.max_open_scans = 4;
  return s;
}

// The two electrons of the frame at `position`: one in each sector, far from each other and from
// the edges, on a background of 95..105 ADU that never reaches the background threshold.
std::vector<std::uint32_t> electrons(std::uint64_t position) {
  return {static_cast<std::uint32_t>(17 + 3 * position), static_cast<std::uint32_t>(200 + position)};
}

std::vector<std::uint16_t> sector_pixels(std::uint64_t position, std::uint32_t sector, const sp::Geometry& geometry) {
  std::vector<std::uint16_t> pixels(geometry.sector_pixels());
  const std::size_t first = std::size_t{sector} * pixels.size();
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<std::uint16_t>(95 + ((first + i) * 7 + position * 3) % 11);
  }
  for (const std::uint32_t flat : electrons(position)) {
    if (flat >= first && flat < first + pixels.size()) pixels[flat - first] = 300;
  }
  return pixels;
}

// Polls `condition` until it holds or kDeadline passes.
bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

void send_info(zmq::socket_t& push, std::uint32_t receiver, std::uint64_t count = kFrames) {
  sp::InfoMessage info;
  info.scan_number = kScan;
  info.receiver = receiver;
  info.scan_x = kScanX;
  info.scan_y = kScanY;
  info.routing = {kUid};
  info.counts = {{kUid, count}};
  const std::string bytes = sp::encode_info(info);
  push.send(zmq::buffer(bytes), zmq::send_flags::none);
}

void send_sector(zmq::socket_t& push, std::uint32_t receiver, std::uint32_t frame, const sp::Geometry& geometry) {
  sp::DataHeader header;
  header.scan_number = kScan;
  header.frame_number = frame;
  header.sector = receiver;
  header.scan_x = kScanX;
  header.scan_y = kScanY;
  header.position_x = frame % kScanX;
  header.position_y = frame / kScanX;
  const std::string head = sp::encode_header(header);
  const std::vector<std::uint16_t> pixels = sector_pixels(header.position(), receiver, geometry);
  push.send(zmq::buffer(head), zmq::send_flags::sndmore);
  push.send(zmq::buffer(pixels), zmq::send_flags::none);
}

}  // namespace

TEST(NodeGroup, CountsAScanSentOverTcpAndDropsWhatDoesNotDecode) {
  sc::NodeGroup nodegroup(settings());
  const sp::Geometry geometry = nodegroup.settings().geometry;
  zmq::context_t context;
  std::vector<zmq::socket_t> pushes;
  for (const std::uint16_t port : nodegroup.ports()) {
    zmq::socket_t push(context, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 0);
    push.connect("tcp://127.0.0.1:" + std::to_string(port));
    pushes.push_back(std::move(push));
  }

  // Malformed first: three frames, and a header that is not msgpack. Dropped and counted.
  pushes[0].send(zmq::str_buffer("a"), zmq::send_flags::sndmore);
  pushes[0].send(zmq::str_buffer("b"), zmq::send_flags::sndmore);
  pushes[0].send(zmq::str_buffer("c"), zmq::send_flags::none);
  pushes[1].send(zmq::str_buffer("\xc1"), zmq::send_flags::sndmore);
  pushes[1].send(zmq::str_buffer("payload"), zmq::send_flags::none);
  for (std::uint32_t r = 0; r < 2; ++r) {
    send_info(pushes[r], r);
    for (std::uint32_t frame = 0; frame < kFrames; ++frame) send_sector(pushes[r], r, frame, geometry);
  }

  const std::optional<sc::ScanResult> result = nodegroup.wait_scan(kDeadline);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->scan_number, kScan);
  EXPECT_FALSE(result->timed_out);
  EXPECT_EQ(result->routing, std::vector<std::string>{kUid});
  EXPECT_EQ(result->expected, (std::vector<std::int64_t>{kFrames, kFrames}));
  EXPECT_EQ(result->received, (std::vector<std::uint64_t>{kFrames, kFrames}));
  EXPECT_TRUE(result->thresholds_known) << result->threshold_error;
  EXPECT_EQ(result->frames_complete, kFrames);
  EXPECT_EQ(result->frames_incomplete + result->evicted_frames + result->late_messages, 0u);
  ASSERT_EQ(result->positions.size(), kFrames);
  for (std::size_t i = 0; i < result->positions.size(); ++i) {
    const std::vector<std::uint32_t> events(result->events.begin() + static_cast<std::ptrdiff_t>(result->offsets[i]),
                                            result->events.begin() + static_cast<std::ptrdiff_t>(result->offsets[i + 1]));
    EXPECT_EQ(events, electrons(result->positions[i])) << "frame at position " << result->positions[i];
  }
  // A receiver counts a message after handing it on, so its counters may trail the result.
  const auto counted = [&] {
    const sc::NodeGroupCounterValues c = nodegroup.counters();
    const auto kind = [&c](sp::Refusal refusal) { return c.malformed.counts[static_cast<std::size_t>(refusal)]; };
    return c.malformed.total() == 2 && kind(sp::Refusal::kParts) == 1 && kind(sp::Refusal::kHeader) == 1 &&
           c.messages == 2u * kFrames && c.info_messages == 2 && c.scans_finished == 1;
  };
  EXPECT_TRUE(eventually(counted)) << "malformed " << nodegroup.counters().malformed.total() << ", messages "
                                   << nodegroup.counters().messages;
}

// Receiver 1 announces and sends all but the last two frames (lost upstream): those are counted
// incomplete, and the result says how many of each receiver's sectors the counted frames hold. A
// restarted aggregator's repeated info changes nothing, an info with another count is refused.
TEST(NodeGroup, CountsEachReceiversSectorsAndTakesARepeatedInfoOnce) {
  sc::NodeGroup nodegroup(settings());
  const sp::Geometry geometry = nodegroup.settings().geometry;
  zmq::context_t context;
  std::vector<zmq::socket_t> pushes;
  for (const std::uint16_t port : nodegroup.ports()) {
    zmq::socket_t push(context, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 0);
    push.connect("tcp://127.0.0.1:" + std::to_string(port));
    pushes.push_back(std::move(push));
  }
  constexpr std::uint32_t kLost = 2;
  send_info(pushes[0], 0);
  send_info(pushes[0], 0);               // repeated: no change
  send_info(pushes[0], 0, kFrames + 1);  // another count: refused, the first stands
  for (std::uint32_t frame = 0; frame < kFrames; ++frame) send_sector(pushes[0], 0, frame, geometry);
  send_info(pushes[1], 1, kFrames - kLost);
  for (std::uint32_t frame = 0; frame < kFrames - kLost; ++frame) send_sector(pushes[1], 1, frame, geometry);

  const std::optional<sc::ScanResult> result = nodegroup.wait_scan(kDeadline);
  ASSERT_TRUE(result);
  EXPECT_FALSE(result->timed_out);
  EXPECT_EQ(result->expected, (std::vector<std::int64_t>{kFrames, kFrames - kLost}));
  EXPECT_EQ(result->frames_complete, kFrames - kLost);
  EXPECT_EQ(result->frames_incomplete, kLost);
  EXPECT_EQ(result->sectors_counted, (std::vector<std::uint64_t>{kFrames, kFrames - kLost}));
  // The same info once more after the scan finished: a repetition, not a late message.
  send_info(pushes[1], 1, kFrames - kLost);
  const auto counted = [&] {
    const sc::NodeGroupCounterValues c = nodegroup.counters();
    return c.repeated_infos == 2 && c.malformed.counts[static_cast<std::size_t>(sp::Refusal::kInfo)] == 1;
  };
  EXPECT_TRUE(eventually(counted)) << "repeated " << nodegroup.counters().repeated_infos;
  EXPECT_EQ(nodegroup.counters().late_messages, 0u);
}
