// SiblingGate: a producer thread waits while it is more than the lead ahead of a sibling that has
// not finished, and a stop or a finished sibling always lets it go.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "sectorflow/producer/errors.hpp"
#include "sectorflow/producer/sibling_gate.hpp"

namespace sp = sectorflow::producer;

namespace {

constexpr int kCheckMs = 5;
constexpr auto kDeadline = std::chrono::seconds(10);

}  // namespace

TEST(SiblingGate, RefusesALeadTheSlowestThreadCouldNeverMeet) {
  EXPECT_THROW(sp::SiblingGate(0, 8), sp::ProducerError);
  EXPECT_THROW(sp::SiblingGate(4, 3), sp::ProducerError);
  EXPECT_NO_THROW(sp::SiblingGate(4, 4));
}

TEST(SiblingGate, ThreadsWithinTheLeadPassWithoutWaiting) {
  sp::SiblingGate gate(2, 4);
  const std::atomic<bool> stop{false};
  EXPECT_TRUE(gate.wait(0, 0, stop, kCheckMs));
  EXPECT_TRUE(gate.wait(0, 2, stop, kCheckMs));
  EXPECT_TRUE(gate.wait(0, 4, stop, kCheckMs));  // thread 1 is at its first frame, 1: 4 <= 1 + 4
  EXPECT_TRUE(gate.wait(1, 1, stop, kCheckMs));
  EXPECT_TRUE(gate.wait(1, 7, stop, kCheckMs));  // 7 <= 4 + 4
}

TEST(SiblingGate, AThreadAheadWaitsUntilItsSiblingCatchesUp) {
  sp::SiblingGate gate(2, 4);
  const std::atomic<bool> stop{false};
  ASSERT_TRUE(gate.wait(0, 4, stop, kCheckMs));
  // Thread 0 wants frame 8 while thread 1 is at 1: 8 > 1 + 4, so it must wait.
  auto ahead = std::async(std::launch::async, [&] { return gate.wait(0, 8, stop, kCheckMs); });
  EXPECT_EQ(ahead.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  ASSERT_TRUE(gate.wait(1, 3, stop, kCheckMs));  // 8 > 3 + 4: still waits
  EXPECT_EQ(ahead.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  ASSERT_TRUE(gate.wait(1, 5, stop, kCheckMs));  // 8 <= 5 + 4: goes
  ASSERT_EQ(ahead.wait_for(kDeadline), std::future_status::ready);
  EXPECT_TRUE(ahead.get());
}

TEST(SiblingGate, AFinishedSiblingHoldsNobodyBack) {
  sp::SiblingGate gate(3, 3);
  const std::atomic<bool> stop{false};
  auto ahead = std::async(std::launch::async, [&] { return gate.wait(0, 30, stop, kCheckMs); });
  gate.finish(1);
  EXPECT_EQ(ahead.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);  // thread 2 is at 2
  gate.finish(2);
  gate.finish(2);  // idempotent
  ASSERT_EQ(ahead.wait_for(kDeadline), std::future_status::ready);
  EXPECT_TRUE(ahead.get());
}

TEST(SiblingGate, AStopEndsTheWaitWithoutRecordingTheFrame) {
  sp::SiblingGate gate(2, 2);
  std::atomic<bool> stop{false};
  auto ahead = std::async(std::launch::async, [&] { return gate.wait(0, 10, stop, kCheckMs); });
  stop.store(true);
  ASSERT_EQ(ahead.wait_for(kDeadline), std::future_status::ready);
  EXPECT_FALSE(ahead.get());
  // Thread 0 is still at frame 0 for the gate: thread 1 may go to frame 0 + 2, and no further.
  const std::atomic<bool> go{false};
  EXPECT_TRUE(gate.wait(1, 1, go, kCheckMs));
  std::atomic<bool> stop_probe{false};
  auto beyond = std::async(std::launch::async, [&] { return gate.wait(1, 5, stop_probe, kCheckMs); });
  EXPECT_EQ(beyond.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  stop_probe.store(true);
  ASSERT_EQ(beyond.wait_for(kDeadline), std::future_status::ready);
  EXPECT_FALSE(beyond.get());
}

TEST(SiblingGate, ManyThreadsRunningFreelyNeverDriftPastTheLead) {
  constexpr std::uint32_t kThreads = 4;
  constexpr std::uint64_t kLead = 8;
  constexpr std::uint64_t kFrames = 4000;
  sp::SiblingGate gate(kThreads, kLead);
  const std::atomic<bool> stop{false};
  std::vector<std::atomic<std::uint64_t>> reached(kThreads);
  for (std::uint32_t t = 0; t < kThreads; ++t) reached[t] = t;
  std::atomic<std::uint64_t> worst{0};
  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t f = t; f < kFrames; f += kThreads) {
        ASSERT_TRUE(gate.wait(t, f, stop, kCheckMs));
        for (std::uint32_t s = 0; s < kThreads; ++s) {
          // A sibling's recorded frame only grows, so this lead is at least the true one at the gate.
          const std::uint64_t other = reached[s].load();
          if (s != t && f > other) {
            std::uint64_t lead = f - other;
            std::uint64_t seen = worst.load();
            while (lead > seen && !worst.compare_exchange_weak(seen, lead)) {
            }
          }
        }
        reached[t] = f;
        if (t == 0 && f % 64 == 0) std::this_thread::yield();  // one thread slower than the others
      }
      gate.finish(t);
    });
  }
  for (auto& thread : threads) thread.join();
  // reached[] is updated just after the gate: a sibling may lag it by its own one step.
  EXPECT_LE(worst.load(), kLead + kThreads);
}
