#include "gaussian_fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace sectorflow::consumer::counting {
namespace {

using Vector3 = std::array<double, 3>;
using Matrix3 = std::array<Vector3, 3>;

double sum_of_squares(const std::vector<double>& x, const std::vector<double>& y, const Vector3& p) {
  const double inv_two_var = 1.0 / (2.0 * p[2] * p[2]);
  double cost = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - p[1];
    const double r = p[0] * std::exp(-d * d * inv_two_var) - y[i];
    cost += r * r;
  }
  return cost;
}

// Normal equations J^T J and J^T r of the residuals r_i = model(x_i) - y_i.
void normal_equations(const std::vector<double>& x, const std::vector<double>& y, const Vector3& p, Matrix3& jtj,
                      Vector3& jtr) {
  jtj = {};
  jtr = {};
  const double var = p[2] * p[2];
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - p[1];
    const double e = std::exp(-d * d / (2.0 * var));
    const double r = p[0] * e - y[i];
    const Vector3 j = {e, p[0] * e * d / var, p[0] * e * d * d / (var * p[2])};
    for (int a = 0; a < 3; ++a) {
      jtr[a] += j[a] * r;
      for (int b = 0; b < 3; ++b) {
        jtj[a][b] += j[a] * j[b];
      }
    }
  }
}

// Solves m * s = rhs by Gaussian elimination with partial pivoting; false if singular.
bool solve3(Matrix3 m, Vector3 rhs, Vector3& s) {
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int row = col + 1; row < 3; ++row) {
      if (std::fabs(m[row][col]) > std::fabs(m[pivot][col])) {
        pivot = row;
      }
    }
    if (m[pivot][col] == 0.0 || !std::isfinite(m[pivot][col])) {
      return false;
    }
    std::swap(m[col], m[pivot]);
    std::swap(rhs[col], rhs[pivot]);
    for (int row = col + 1; row < 3; ++row) {
      const double f = m[row][col] / m[col][col];
      for (int k = col; k < 3; ++k) {
        m[row][k] -= f * m[col][k];
      }
      rhs[row] -= f * rhs[col];
    }
  }
  for (int row = 2; row >= 0; --row) {
    double v = rhs[row];
    for (int k = row + 1; k < 3; ++k) {
      v -= m[row][k] * s[k];
    }
    s[row] = v / m[row][row];
  }
  return std::isfinite(s[0]) && std::isfinite(s[1]) && std::isfinite(s[2]);
}

}  // namespace

GaussianFit fit_gaussian(const std::vector<double>& x, const std::vector<double>& y, GaussianParameters start) {
  constexpr int kMaxIterations = 1000;
  constexpr double kStepTolerance = 1e-13;
  constexpr double kMaxDamping = 1e32;

  GaussianFit fit;
  Vector3 p = {start.amplitude, start.mean, start.sigma};
  double cost = sum_of_squares(x, y, p);
  if (!std::isfinite(cost) || p[2] == 0.0) {
    fit.parameters = start;
    return fit;
  }
  Matrix3 jtj;
  Vector3 jtr;
  normal_equations(x, y, p, jtj, jtr);
  double damping = 1e-3;
  for (int iteration = 1; iteration <= kMaxIterations; ++iteration) {
    fit.iterations = iteration;
    // Marquardt's scaling: damp each parameter by its own curvature, so that amplitude (counts)
    // and mean/sigma (ADU) are treated alike.
    Matrix3 damped = jtj;
    for (int a = 0; a < 3; ++a) {
      damped[a][a] += damping * std::max(jtj[a][a], std::numeric_limits<double>::min());
    }
    Vector3 step{};
    const Vector3 minus_jtr = {-jtr[0], -jtr[1], -jtr[2]};
    if (!solve3(damped, minus_jtr, step)) {
      damping *= 10.0;
      if (damping > kMaxDamping) {
        break;
      }
      continue;
    }
    const Vector3 trial = {p[0] + step[0], p[1] + step[1], p[2] + step[2]};
    const double trial_cost = trial[2] != 0.0 ? sum_of_squares(x, y, trial) : HUGE_VAL;
    if (std::isfinite(trial_cost) && trial_cost <= cost) {
      bool small = true;
      for (int a = 0; a < 3; ++a) {
        small = small && std::fabs(step[a]) <= kStepTolerance * (std::fabs(p[a]) + kStepTolerance);
      }
      p = trial;
      const bool no_progress = trial_cost == cost;
      cost = trial_cost;
      if (small || no_progress) {
        fit.converged = true;
        break;
      }
      normal_equations(x, y, p, jtj, jtr);
      damping = std::max(damping / 10.0, 1e-12);
    } else {
      damping *= 10.0;
      if (damping > kMaxDamping) {
        // No step, however short, lowers the cost: p is a minimum to machine precision.
        fit.converged = true;
        break;
      }
    }
  }
  fit.parameters = {p[0], p[1], p[2]};
  return fit;
}

}  // namespace sectorflow::consumer::counting
