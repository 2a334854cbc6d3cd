// ThresholdSample: a sample built one frame at a time gives calculate_thresholds' statistics for the
// same frames, in any order, so a NodeGroup may let each sample frame go (packed) once it is added.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sectorflow/consumer/counting/errors.hpp"
#include "sectorflow/consumer/counting/thresholds.hpp"

namespace cs = sectorflow::consumer::counting;

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

TEST(ThresholdSample, TheSectorsOfIncompleteFramesGiveTheStatisticsOfThosePixelsAlone) {
  // Two 32 x 32 frames of four 16 x 16 sectors; each lacks one sector (its pixels hold garbage,
  // 9000 ADU, that must not count). Their sample equals that of the same pixels as whole frames of
  // their own: the three sectors of each laid side by side as a 16 x 48 frame.
  const cs::Calibration calibration(cs::FrameShape{32, 32});
  const std::vector<cs::PixelBlock> sectors = {{0, 0, 16, 16}, {0, 16, 16, 16}, {16, 0, 16, 16}, {16, 16, 16, 16}};
  std::vector<std::vector<std::uint16_t>> frames = {noise_frame(5, 20, 1024), noise_frame(6, 17, 1024)};
  const std::vector<std::vector<cs::PixelBlock>> present = {{sectors[0], sectors[1], sectors[3]},
                                                            {sectors[1], sectors[2], sectors[3]}};
  const cs::Calibration strips(cs::FrameShape{16, 48});
  std::vector<std::vector<std::uint16_t>> laid(2);
  for (std::size_t f = 0; f < frames.size(); ++f) {
    laid[f].assign(16 * 48, 0);
    for (std::size_t b = 0; b < present[f].size(); ++b) {
      const cs::PixelBlock& block = present[f][b];
      for (std::size_t r = 0; r < 16; ++r) {
        for (std::size_t c = 0; c < 16; ++c) laid[f][r * 48 + b * 16 + c] = frames[f][(block.row0 + r) * 32 + block.col0 + c];
      }
    }
    const cs::PixelBlock& lacking = sectors[f == 0 ? 2 : 0];
    for (std::size_t r = 0; r < 16; ++r) {
      for (std::size_t c = 0; c < 16; ++c) frames[f][(lacking.row0 + r) * 32 + lacking.col0 + c] = 9000;
    }
  }
  cs::ThresholdSample sample(calibration);
  for (std::size_t f = 0; f < frames.size(); ++f) sample.add(frames[f].data(), present[f]);
  const cs::ThresholdStatistics expected = cs::calculate_thresholds({laid[0].data(), laid[1].data()}, strips, {4.5, 175.0});
  const cs::ThresholdStatistics got = sample.statistics({4.5, 175.0});
  EXPECT_EQ(sample.frames(), 2u);
  EXPECT_EQ(got.max_sample, expected.max_sample);
  EXPECT_EQ(got.mean, expected.mean);
  EXPECT_EQ(got.variance, expected.variance);
  EXPECT_EQ(got.background_threshold, expected.background_threshold);
  EXPECT_EQ(got.x_ray_threshold, expected.x_ray_threshold);

  // Every block of a frame is the whole frame; a block outside the frame is refused.
  const std::vector<std::uint16_t> clean = noise_frame(7, 20, 1024);
  cs::ThresholdSample whole(calibration), blocks(calibration);
  whole.add(clean.data());
  blocks.add(clean.data(), sectors);
  EXPECT_EQ(whole.statistics({4.5, 175.0}).mean, blocks.statistics({4.5, 175.0}).mean);
  EXPECT_THROW(blocks.add(frames[0].data(), {{20, 20, 16, 16}}), cs::CountingError);
  EXPECT_EQ(blocks.frames(), 1u);
}

TEST(ThresholdSample, TwoSamplesMergedGiveTheStatisticsOfAllTheirFrames) {
  // Two NodeGroups' samples of one scan: rank 0 fits the scan's thresholds from their merge.
  const cs::Calibration calibration(cs::FrameShape{32, 32});
  const std::vector<std::vector<std::uint16_t>> frames = {noise_frame(1, 20, 1024), noise_frame(2, 14, 1024),
                                                          noise_frame(3, 26, 1024), noise_frame(4, 20, 1024)};
  std::vector<const std::uint16_t*> pointers;
  for (const auto& frame : frames) pointers.push_back(frame.data());
  const cs::ThresholdStatistics whole = cs::calculate_thresholds(pointers, calibration, {4.5, 175.0});

  cs::ThresholdSample first(calibration);
  cs::ThresholdSample second(calibration);
  first.add(frames[0].data());
  first.add(frames[2].data());
  second.add(frames[1].data());
  second.add(frames[3].data());
  cs::SampleHistogram merged;  // empty, as rank 0 starts
  merged.merge(first.histogram());
  merged.merge(cs::SampleHistogram{});  // a NodeGroup that received no frame of the scan
  merged.merge(second.histogram());
  EXPECT_EQ(merged.frames, 4u);
  const cs::ThresholdStatistics fitted = merged.statistics({4.5, 175.0});
  EXPECT_EQ(fitted.number_of_samples, 4);
  EXPECT_EQ(fitted.min_sample, whole.min_sample);
  EXPECT_EQ(fitted.max_sample, whole.max_sample);
  EXPECT_EQ(fitted.mean, whole.mean);
  EXPECT_EQ(fitted.variance, whole.variance);
  EXPECT_EQ(fitted.optimized_mean, whole.optimized_mean);
  EXPECT_EQ(fitted.background_threshold, whole.background_threshold);
  EXPECT_EQ(fitted.x_ray_threshold, whole.x_ray_threshold);
}
