#include "sectorflow/simulator/noise_table.hpp"

#include <algorithm>
#include <cmath>

namespace sectorflow::simulator {
namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

double normal_cdf(double z) { return 0.5 * std::erfc(-z / kSqrt2); }

}  // namespace

double normal_quantile(double p) {
  // Abramowitz and Stegun 26.2.23 (error < 4.5e-4) as the start, then Newton steps on the CDF.
  const double q = p < 0.5 ? p : 1.0 - p;
  const double t = std::sqrt(-2.0 * std::log(q));
  double z = t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308)));
  if (p < 0.5) z = -z;
  for (int step = 0; step < 3; ++step) {
    const double density = kInvSqrt2Pi * std::exp(-0.5 * z * z);
    z -= (normal_cdf(z) - p) / density;
  }
  return z;
}

std::vector<std::uint32_t> dark_quantiles(double mean, double sigma, std::uint32_t max_value) {
  std::vector<std::uint32_t> table(kNoiseTableSize);
  const double high = static_cast<double>(max_value);
  for (std::size_t i = 0; i < kNoiseTableSize; ++i) {
    const double z = normal_quantile((static_cast<double>(i) + 0.5) / static_cast<double>(kNoiseTableSize));
    const double level = std::floor(mean + sigma * z + 0.5);
    table[i] = static_cast<std::uint32_t>(std::clamp(level, 0.0, high));
  }
  return table;
}

}  // namespace sectorflow::simulator
