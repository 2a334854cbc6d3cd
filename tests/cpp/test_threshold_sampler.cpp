// ThresholdSampler with shared thresholds (ThresholdSettings::share_ms): a full sample is closed and
// handed to the job, its frames keep waiting, and the NodeGroup counts with the scan's thresholds
// when they come, or with its own sample's once share_ms have passed.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "sectorflow/consumer/counting/calibration.hpp"
#include "sectorflow/consumer/counting/thresholds.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_settings.hpp"
#include "sectorflow/consumer/nodegroup/threshold_sampler.hpp"

namespace cs = sectorflow::consumer::counting;
namespace sc = sectorflow::consumer::nodegroup;

namespace {

std::vector<std::uint16_t> noise_frame(std::uint32_t seed) {
  std::vector<std::uint16_t> frame(1024);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& pixel : frame) {
    x = x * 1664525u + 1013904223u;
    const std::uint32_t u = x >> 16;
    pixel = static_cast<std::uint16_t>(18 + (u % 10) / 3 + (u % 10) / 4 + (u % 3));
  }
  return frame;
}

sc::ThresholdSampler sampler_sharing(std::uint32_t share_ms) {
  sc::ThresholdSettings settings{2, 4.5, 175.0, 0.0, 0.0, share_ms};
  return sc::ThresholdSampler(settings, std::make_shared<const cs::Calibration>(cs::FrameShape{32, 32}));
}

}  // namespace

TEST(ThresholdSampler, ASharedSampleWaitsForTheScansThresholdsAndCountsWithThem) {
  auto sampler = sampler_sharing(60'000);
  const auto a = noise_frame(1), b = noise_frame(2), c = noise_frame(3);
  EXPECT_FALSE(sampler.take_sample());  // still sampling
  EXPECT_TRUE(sampler.offer(a.data()));
  EXPECT_TRUE(sampler.offer(b.data()));
  EXPECT_FALSE(sampler.decided());      // full, closed: waits for the job's thresholds
  EXPECT_TRUE(sampler.offer(c.data()));  // a later frame waits too, outside the sample
  sampler.decide_if_overdue();           // a minute to go
  EXPECT_FALSE(sampler.decided());
  const auto sample = sampler.take_sample();
  ASSERT_TRUE(sample);
  EXPECT_EQ(sample->frames, 2u);
  EXPECT_FALSE(sampler.take_sample());  // handed over once

  cs::ThresholdStatistics scan;
  scan.background_threshold = 29.54;
  scan.x_ray_threshold = 400.0;
  EXPECT_TRUE(sampler.adopt(scan));
  ASSERT_TRUE(sampler.decided());
  EXPECT_TRUE(sampler.shared());
  EXPECT_EQ(sampler.statistics().background_threshold, 29.54);
  ASSERT_TRUE(sampler.options());
  EXPECT_FALSE(sampler.adopt(scan));  // decided once
}

TEST(ThresholdSampler, WithoutTheScansThresholdsItDecidesFromItsOwnSampleAfterTheWait) {
  auto sampler = sampler_sharing(1);
  const auto a = noise_frame(1), b = noise_frame(2);
  sampler.offer(a.data());
  sampler.offer(b.data());
  // The full pool's path: waits for them at most until share_ms after closing, then decides alone.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!sampler.settle(std::chrono::milliseconds(20)) && std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_TRUE(sampler.decided());
  EXPECT_FALSE(sampler.shared());
  EXPECT_TRUE(sampler.error().empty()) << sampler.error();
  EXPECT_EQ(sampler.statistics().number_of_samples, 2);
  EXPECT_FALSE(sampler.take_sample());
}

TEST(ThresholdSampler, WithoutSharingAFullSampleDecidesAtOnce) {
  auto sampler = sampler_sharing(0);
  const auto a = noise_frame(1), b = noise_frame(2);
  sampler.offer(a.data());
  sampler.offer(b.data());
  EXPECT_TRUE(sampler.decided());
  EXPECT_FALSE(sampler.shared());
  EXPECT_FALSE(sampler.take_sample());
}
