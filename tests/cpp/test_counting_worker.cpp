// A NodeGroup's counting thread (CountingWorker) on its own: hold a sector back while the pool is
// full, free a slot when a frame completes, count a frame early when its missing sectors are known
// lost or when nothing can move, finish a scan on every receiver's end marker, drop late sectors
// and count duplicates. The test plays the receiver threads: one inproc PUSH per receiver sending
// the envelopes of consumer/nodegroup/src/envelope.hpp, as Receiver does.
//
// Each test queues its messages in an order that makes the outcome independent of thread timing:
// the worker's stall rule (count a frame early when nothing came for a while) is set to "never"
// unless a test is about it, and a test waits for the worker to have placed a sector before it
// sends what must come after.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "envelope.hpp"
#include "sectorflow/consumer/nodegroup/counting_worker.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_counters.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_settings.hpp"
#include "sectorflow/consumer/nodegroup/scan_result.hpp"
#include "sectorflow/consumer/nodegroup/threshold_sampler.hpp"

namespace sc = sectorflow::consumer::nodegroup;
using sc::detail::Envelope;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t kScan = 3;
constexpr std::uint32_t kScanX = 8;  // a scan of 8 x 1 probe positions: frame f is at position f
constexpr std::uint32_t kScanY = 1;
// How long a test waits for a condition before it fails: a deadline, not a speed expectation.
constexpr auto kDeadline = 60s;
constexpr std::chrono::milliseconds kNever = std::chrono::hours(24);
constexpr std::chrono::milliseconds kAtOnce{0};

// 2 x 4 pixels in two sectors of 2 x 2; receiver r delivers sector r. Frames are assembled, not
// counted (count = false): these tests are about the pool, not the arithmetic (the thresholds are
// never used) nor the sockets (host, recv_hwm).
sc::NodeGroupSettings settings_for(std::uint32_t pool_frames, std::vector<std::uint32_t> producer_threads = {1, 1}) {
  sc::NodeGroupSettings settings;
  settings.uid = "ng-test";
  settings.host = "127.0.0.1";
  settings.geometry = {2, 4, 2, 2, 2};
  settings.receivers = 2;
  settings.producer_threads = std::move(producer_threads);
  settings.counting_threads = 1;
  settings.recv_hwm = 1000;
  settings.pool_frames = pool_frames;
  settings.scan_timeout_s = 60.0;
  settings.thresholds = {100, 4.5, 175.0, 0.0, 0.0};
  settings.count = false;
  settings.limits.max_positions = 1024;
  settings.max_open_scans = 4;
  settings.validate();
  return settings;
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

// A CountingWorker running on its own thread, fed by one inproc PUSH per receiver. The
// destructor stops and joins the thread, then closes the sockets before the context.
class RunningWorker {
 public:
  RunningWorker(sc::NodeGroupSettings settings, std::chrono::milliseconds stall_before_eviction)
      : settings_(std::move(settings)),
        worker_(context_, kEndpoint, settings_, counters_, hooks(), stall_before_eviction) {
    for (std::uint32_t r = 0; r < settings_.receivers; ++r) {
      zmq::socket_t push(context_, zmq::socket_type::push);
      push.set(zmq::sockopt::linger, 0);
      push.set(zmq::sockopt::sndhwm, 1000);  // a test's messages all fit: sends never block
      push.connect(kEndpoint + std::to_string(r));
      pushes_.push_back(std::move(push));
    }
    thread_ = std::thread([this] { worker_.run(stop_); });
  }
  ~RunningWorker() {
    stop_.store(true);
    thread_.join();
  }
  RunningWorker(const RunningWorker&) = delete;
  RunningWorker& operator=(const RunningWorker&) = delete;

  /// Receiver r's sector of `frame` (all its pixels `fill`).
  void sector(std::uint32_t receiver, std::uint32_t frame, std::uint16_t fill = 1) {
    Envelope envelope;
    envelope.kind = Envelope::kData;
    envelope.receiver = receiver;
    envelope.scan = kScan;
    envelope.frame = frame;
    envelope.sector = receiver;
    envelope.scan_x = kScanX;
    envelope.scan_y = kScanY;
    envelope.position = frame;
    const std::vector<std::uint16_t> pixels(settings_.geometry.sector_pixels(), fill);
    pushes_[receiver].send(zmq::message_t(&envelope, sizeof envelope), zmq::send_flags::sndmore);
    pushes_[receiver].send(zmq::message_t(pixels.data(), pixels.size() * sizeof(std::uint16_t)),
                           zmq::send_flags::none);
  }

  /// Receiver r's end marker: its part of the scan is over.
  void end(std::uint32_t receiver) {
    Envelope envelope;
    envelope.kind = Envelope::kEnd;
    envelope.receiver = receiver;
    envelope.scan = kScan;
    pushes_[receiver].send(zmq::message_t(&envelope, sizeof envelope), zmq::send_flags::none);
  }

  /// The worker's part of the scan, once it has handed it over (nothing by the deadline).
  std::optional<sc::ScanResult> wait_scan() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!finished_changed_.wait_for(lock, kDeadline, [this] { return finished_.count(kScan) != 0; })) {
      return std::nullopt;
    }
    return finished_.at(kScan);
  }

  bool scan_handed_over() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_.count(kScan) != 0;
  }

  sc::NodeGroupCounterValues counters() const { return counters_.values(); }

 private:
  static inline const std::string kEndpoint = "inproc://test-counting-from-";

  sc::WorkerHooks hooks() {
    return {[this](std::uint32_t) { return std::make_shared<sc::ThresholdSampler>(settings_.thresholds, nullptr); },
            [this](std::uint32_t scan, sc::ScanResult&& part) {
              std::lock_guard<std::mutex> lock(mutex_);
              finished_[scan] = std::move(part);
              finished_changed_.notify_all();
            }};
  }

  sc::NodeGroupSettings settings_;
  sc::NodeGroupCounters counters_;
  zmq::context_t context_;
  sc::CountingWorker worker_;
  std::vector<zmq::socket_t> pushes_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::condition_variable finished_changed_;
  std::map<std::uint32_t, sc::ScanResult> finished_;
  std::thread thread_;
};

std::vector<std::uint64_t> sorted(std::vector<std::uint64_t> values) {
  std::sort(values.begin(), values.end());
  return values;
}

using Missing = std::vector<std::vector<std::uint32_t>>;

}  // namespace

TEST(CountingWorker, EndMarkersOfEveryReceiverFinishTheScan) {
  RunningWorker worker(settings_for(4), kNever);
  for (std::uint32_t frame = 0; frame < 4; ++frame) {
    worker.sector(0, frame);
    worker.sector(1, frame);
  }
  worker.end(0);
  ASSERT_TRUE(eventually([&] { return worker.counters().frames_complete == 4; }));
  EXPECT_FALSE(worker.scan_handed_over()) << "handed over before receiver 1's end marker";

  worker.end(1);
  const std::optional<sc::ScanResult> part = worker.wait_scan();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->scan_number, kScan);
  EXPECT_EQ(std::pair(part->scan_x, part->scan_y), std::pair(kScanX, kScanY));
  EXPECT_EQ(sorted(part->positions), (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(part->offsets.size(), 5u);
  EXPECT_EQ(part->frames_complete, 4u);
  EXPECT_EQ(part->frames_incomplete + part->evicted_frames + part->late_messages + part->duplicate_sectors, 0u);
  EXPECT_EQ(worker.counters().pool_slots_in_use, 0u);
}

TEST(CountingWorker, AFullPoolHoldsASectorBackUntilAFrameCompletes) {
  // One slot, and receiver 0 three frames ahead of receiver 1: its frames 1 and 2 find the pool
  // full. Counting them early would lose sectors that are on their way (and the stall rule is
  // off), so they must wait for receiver 1 to complete frame 0 and free the slot.
  RunningWorker worker(settings_for(1), kNever);
  for (std::uint32_t frame = 0; frame < 3; ++frame) worker.sector(0, frame);
  ASSERT_TRUE(eventually([&] { return worker.counters().pool_slots_in_use == 1; }));
  for (std::uint32_t frame = 0; frame < 3; ++frame) worker.sector(1, frame);
  worker.end(0);
  worker.end(1);

  const std::optional<sc::ScanResult> part = worker.wait_scan();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->frames_complete, 3u);
  EXPECT_EQ(part->frames_incomplete, 0u);
  EXPECT_EQ(part->evicted_frames, 0u);
  EXPECT_EQ(sorted(part->positions), (std::vector<std::uint64_t>{0, 1, 2}));
  const sc::NodeGroupCounterValues counters = worker.counters();
  EXPECT_EQ(counters.pool_slots_high_water, 1u) << "the pool grew past its one slot";
  EXPECT_EQ(counters.pool_slots_in_use, 0u) << "a completed frame kept its slot";
}

TEST(CountingWorker, AFrameWhoseMissingSectorIsKnownLostIsCountedEarly) {
  // Receiver 1 has one producer thread, which sends its frames in order: once it has sent frame 1,
  // its sector of frame 0 is lost, so frame 0 is counted at once (not after a stall, which is off)
  // to make room for frame 1.
  RunningWorker worker(settings_for(1, {1, 1}), kNever);
  worker.sector(0, 0);
  ASSERT_TRUE(eventually([&] { return worker.counters().pool_slots_in_use == 1; }));
  worker.sector(1, 1);
  ASSERT_TRUE(eventually([&] { return worker.counters().evicted_frames == 1; }));
  worker.sector(0, 1);
  worker.end(0);
  worker.end(1);

  const std::optional<sc::ScanResult> part = worker.wait_scan();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->evicted_frames, 1u);
  EXPECT_EQ(part->frames_incomplete, 1u);
  EXPECT_EQ(part->incomplete_positions, std::vector<std::uint64_t>{0});
  EXPECT_EQ(part->incomplete_missing_sectors, (Missing{{1}}));
  EXPECT_EQ(part->frames_complete, 1u);
  EXPECT_EQ(sorted(part->positions), (std::vector<std::uint64_t>{0, 1}));
}

TEST(CountingWorker, WhenNothingComesForTheStallTimeTheOldestFrameIsCountedEarly) {
  // Receiver 1 is silent (slow or dead: the worker cannot tell) while receiver 0's frame 1 waits
  // for the one slot. With the stall time at zero the worker gives up on frame 0 at once; what
  // receiver 1 sends of it afterwards is late.
  RunningWorker worker(settings_for(1), kAtOnce);
  worker.sector(0, 0);
  worker.sector(0, 1);
  ASSERT_TRUE(eventually([&] { return worker.counters().evicted_frames == 1; }));
  worker.sector(1, 0);
  worker.sector(1, 1);
  worker.end(0);
  worker.end(1);

  const std::optional<sc::ScanResult> part = worker.wait_scan();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->evicted_frames, 1u);
  EXPECT_EQ(part->incomplete_positions, std::vector<std::uint64_t>{0});
  EXPECT_EQ(part->incomplete_missing_sectors, (Missing{{1}}));
  EXPECT_EQ(part->frames_complete, 1u);
  EXPECT_EQ(part->late_messages, 1u) << "receiver 1's sector of frame 0, which was already counted";
  EXPECT_EQ(worker.counters().late_messages, 1u);
}

TEST(CountingWorker, AReceiverSilentThroughAStallIsNotWaitedForAgainUntilItDelivers) {
  // Receiver 1 died after frame 0: one slot, receiver 0 brings the scan's 7 other
  // frames. The first goes after one stall; the rest at once, not one a stall (6 stalls: on a real
  // scan the aggregator declared the NodeGroup dead meanwhile). The bound is two stalls.
  constexpr std::chrono::milliseconds kStall{2000};
  RunningWorker worker(settings_for(1), kStall);
  worker.sector(1, 0);
  worker.sector(0, 0);
  ASSERT_TRUE(eventually([&] { return worker.counters().frames_complete == 1; }));
  const auto started = std::chrono::steady_clock::now();
  for (std::uint32_t frame = 1; frame < kScanX * kScanY; ++frame) worker.sector(0, frame);
  ASSERT_TRUE(eventually([&] { return worker.counters().evicted_frames == 6; }));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2 * kStall);
  worker.end(0);
  worker.end(1);

  const std::optional<sc::ScanResult> part = worker.wait_scan();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->frames_complete, 1u);
  EXPECT_EQ(part->incomplete_positions.size(), 7u);
}

TEST(CountingWorker, WhenEveryReceiverWaitsForASlotTheOldestFrameGoesWithoutAStall) {
  // Two producer threads per receiver (frame f from thread f % 2), one slot, the stall rule off.
  // Frame 0 holds the slot; both receivers then bring frame 1. Nothing says frame 0's sector 1 is
  // lost (receiver 1's thread 0 has sent nothing yet), but with every receiver waiting nothing
  // else can move: frame 0 is counted early.
  RunningWorker worker(settings_for(1, {2, 2}), kNever);
  worker.sector(0, 0);
  ASSERT_TRUE(eventually([&] { return worker.counters().pool_slots_in_use == 1; }));
  worker.sector(1, 1);
  worker.sector(0, 1);
  ASSERT_TRUE(eventually([&] { return worker.counters().frames_complete == 1; }));
  worker.end(0);
  worker.end(1);

  const std::optional<sc::ScanResult> part = worker.wait_scan();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->evicted_frames, 1u);
  EXPECT_EQ(part->incomplete_positions, std::vector<std::uint64_t>{0});
  EXPECT_EQ(part->incomplete_missing_sectors, (Missing{{1}}));
  EXPECT_EQ(part->frames_complete, 1u);
}

TEST(CountingWorker, FramesStillOpenWhenTheScanEndsAreCountedIncomplete) {
  RunningWorker worker(settings_for(4), kNever);
  worker.sector(0, 0);
  worker.sector(1, 0);
  worker.sector(0, 1);  // receiver 1 never sends frame 1
  worker.end(0);
  worker.end(1);

  const std::optional<sc::ScanResult> part = worker.wait_scan();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->frames_complete, 1u);
  EXPECT_EQ(part->frames_incomplete, 1u);
  EXPECT_EQ(part->incomplete_positions, std::vector<std::uint64_t>{1});
  EXPECT_EQ(part->incomplete_missing_sectors, (Missing{{1}}));
  EXPECT_EQ(part->evicted_frames, 0u) << "counted at the end of the scan, not to free a slot";
  EXPECT_EQ(worker.counters().pool_slots_in_use, 0u);
}

TEST(CountingWorker, ASectorThatComesTwiceIsCountedAsADuplicate) {
  RunningWorker worker(settings_for(2), kNever);
  worker.sector(0, 0, 7);
  worker.sector(0, 0, 9);
  ASSERT_TRUE(eventually([&] { return worker.counters().duplicate_sectors == 1; }));
  worker.sector(1, 0);
  worker.end(0);
  worker.end(1);

  const std::optional<sc::ScanResult> part = worker.wait_scan();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->duplicate_sectors, 1u);
  EXPECT_EQ(part->frames_complete, 1u);
  EXPECT_EQ(part->positions, std::vector<std::uint64_t>{0});
}
