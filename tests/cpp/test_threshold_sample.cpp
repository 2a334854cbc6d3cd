// ThresholdSample: a sample built one frame at a time gives calculate_thresholds' statistics for the
// same frames, in any order, so a NodeGroup may let each sample frame go (packed) once it is added.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sectorflow/counting/errors.hpp"
#include "sectorflow/counting/thresholds.hpp"

namespace cs = sectorflow::counting;

namespace {

// Dark noise between `low` and `low + 9` with a few electrons, different for every seed.
std::vector<std::uint16_t> noise_frame(std::uint32_t seed, std::uint16_t low, std::size_t pixels) {
  std::vector<std::uint16_t> frame(pixels);
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < pixels; ++i) {
    x = x * 1664525u + 1013904223u;
    const std::uint32_t u = x >> 16;
    frame[i] = static_cast<std::uint16_t>(low + (u % 10) / 3 + (u % 10) / 4 + (u % 7 == 0 ? 1 : 0) + (u % 3));
    if (u % 997 == 0) frame[i] = static_cast<std::uint16_t>(low + 300);
  }
  return frame;
}

}  // namespace

TEST(ThresholdSample, FramesAddedInAnyOrderGiveTheStatisticsOfTheWholeSample) {
  const cs::Calibration calibration(cs::FrameShape{32, 32});
  // The later frames reach below and above the first one's range, so the histogram grows both ways.
  const std::vector<std::vector<std::uint16_t>> frames = {noise_frame(1, 20, 1024), noise_frame(2, 14, 1024),
                                                          noise_frame(3, 26, 1024), noise_frame(4, 20, 1024)};
  std::vector<const std::uint16_t*> pointers;
  for (const auto& frame : frames) pointers.push_back(frame.data());
  const cs::ThresholdStatistics whole = cs::calculate_thresholds(pointers, calibration, {4.5, 175.0});

  cs::ThresholdSample sample(calibration);
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) sample.add(it->data());
  EXPECT_EQ(sample.frames(), 4u);
  const cs::ThresholdStatistics added = sample.statistics({4.5, 175.0});
  EXPECT_EQ(added.number_of_samples, 4);
  EXPECT_EQ(added.min_sample, whole.min_sample);
  EXPECT_EQ(added.max_sample, whole.max_sample);
  EXPECT_EQ(added.mean, whole.mean);
  EXPECT_EQ(added.variance, whole.variance);
  EXPECT_EQ(added.number_of_bins, whole.number_of_bins);
  EXPECT_EQ(added.optimized_mean, whole.optimized_mean);
  EXPECT_EQ(added.optimized_std_dev, whole.optimized_std_dev);
  EXPECT_EQ(added.background_threshold, whole.background_threshold);
  EXPECT_EQ(added.x_ray_threshold, whole.x_ray_threshold);
}

TEST(ThresholdSample, AFrameThatCannotBeAddedLeavesTheSampleAsItWas) {
  // A gain this large puts the values 2^26 ADU apart: too wide a histogram, refused with a reason.
  const cs::Calibration calibration(cs::FrameShape{32, 32}, {}, std::vector<float>(1024, 4096.0f));
  cs::ThresholdSample sample(calibration);
  const std::vector<std::uint16_t> calm(1024, 10);
  std::vector<std::uint16_t> wild(1024, 10);
  wild[7] = 60000;
  sample.add(calm.data());
  EXPECT_THROW(sample.add(wild.data()), cs::CountingError);
  EXPECT_THROW(sample.add(nullptr), cs::CountingError);
  EXPECT_EQ(sample.frames(), 1u);
  EXPECT_THROW((void)sample.statistics(), cs::CountingError) << "one value only: nothing to fit, still refused";
  EXPECT_THROW((void)cs::ThresholdSample(calibration).statistics(), cs::CountingError) << "empty";
}
