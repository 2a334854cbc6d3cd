// Least-squares fit of a Gaussian a * exp(-(x - mu)^2 / (2 sigma^2)) to histogram counts, by
// Levenberg-Marquardt with analytic derivatives. Internal to the threshold calculation.
#pragma once

#include <vector>

namespace sectorflow::consumer::counting {

struct GaussianParameters {
  double amplitude = 0.0;
  double mean = 0.0;
  double sigma = 0.0;
};

struct GaussianFit {
  GaussianParameters parameters;
  int iterations = 0;
  bool converged = false;
};

/// Fits from `start` until the step is negligible against the parameters (relative 1e-13) or no
/// step lowers the sum of squares any more; converged is false after 1000 iterations.
GaussianFit fit_gaussian(const std::vector<double>& x, const std::vector<double>& y, GaussianParameters start);

}  // namespace sectorflow::consumer::counting
