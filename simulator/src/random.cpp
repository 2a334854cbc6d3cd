#include "sectorflow/simulator/random.hpp"

#include <cmath>

namespace sectorflow::simulator {
namespace {

// log(k!) without std::lgamma, which writes the global `signgam` and so is not thread-safe.
double log_factorial(double k) {
  if (k < 7.0) {
    double sum = 0.0;
    for (double i = 2.0; i <= k; i += 1.0) sum += std::log(i);
    return sum;
  }
  // Stirling's series for log Gamma(x), x = k + 1 >= 8: error below 1e-10.
  const double x = k + 1.0;
  const double x2 = x * x;
  return (x - 0.5) * std::log(x) - x + 0.91893853320467274178 +
         (1.0 / 12.0 - (1.0 / 360.0 - 1.0 / (1260.0 * x2)) / x2) / x;
}

std::uint32_t poisson_by_multiplication(Stream& stream, double mean) {
  const double limit = std::exp(-mean);
  double product = stream.uniform();
  std::uint32_t k = 0;
  while (product > limit) {
    ++k;
    product *= stream.uniform();
  }
  return k;
}

std::uint32_t poisson_ptrs(Stream& stream, double mean) {
  const double log_mean = std::log(mean);
  const double b = 0.931 + 2.53 * std::sqrt(mean);
  const double a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
  const double v_r = 0.9277 - 3.6224 / (b - 2.0);
  for (;;) {
    const double u = stream.uniform() - 0.5;
    const double v = stream.uniform();
    const double us = 0.5 - std::fabs(u);
    if (us <= 0.0) continue;
    const double k = std::floor((2.0 * a / us + b) * u + mean + 0.43);
    if (us >= 0.07 && v <= v_r) return static_cast<std::uint32_t>(k);
    if (k < 0.0 || (us < 0.013 && v > us)) continue;
    if (std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b) <=
        -mean + k * log_mean - log_factorial(k)) {
      return static_cast<std::uint32_t>(k);
    }
  }
}

}  // namespace

std::uint32_t sample_poisson(Stream& stream, double mean) {
  if (mean <= 0.0) return 0;
  return mean < 10.0 ? poisson_by_multiplication(stream, mean) : poisson_ptrs(stream, mean);
}

}  // namespace sectorflow::simulator
