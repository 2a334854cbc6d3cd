#include "sectorflow/simulator/electrons.hpp"

#include <cmath>

namespace sectorflow::simulator {
namespace {

constexpr double kTwoPi = 6.28318530717958647692;
constexpr double kSqrt2 = 1.41421356237309504880;
// Rejection sampling of the disk-frame intersection accepts at least ~1/(pi * radius) of the
// draws; past this many the strike goes to the frame centre (never reached in practice).
constexpr int kMaxDiskDraws = 1 << 20;

void axis_weights(double centre, double spread_px, int radius, std::int64_t& first, double* weights) {
  const auto pixel = static_cast<std::int64_t>(std::floor(centre));
  first = pixel - radius;
  const int span = 2 * radius + 1;
  if (radius == 0) {
    weights[0] = 1.0;
    return;
  }
  const double scale = 1.0 / (spread_px * kSqrt2);
  double previous = std::erfc(-(static_cast<double>(first) - centre) * scale);
  double sum = 0.0;
  for (int k = 0; k < span; ++k) {
    const double next = std::erfc(-(static_cast<double>(first + k + 1) - centre) * scale);
    weights[k] = next - previous;  // 2 x the Gaussian mass over the pixel; normalised below
    sum += weights[k];
    previous = next;
  }
  for (int k = 0; k < span; ++k) weights[k] /= sum;
}

}  // namespace

FrameElectrons::FrameElectrons(std::uint64_t key, const SimulatorSettings& settings,
                               const protocol::Geometry& geometry, const SpecimenPoint* specimen)
    : stream_(key),
      count_(sample_poisson(stream_, settings.dose_per_frame * (specimen ? specimen->transmission : 1.0))),
      rows_(geometry.frame_rows),
      cols_(geometry.frame_cols),
      radius_(settings.bright_field_radius_px),
      centre_row_(0.5 * rows_),
      centre_col_(0.5 * cols_) {
  // A disk that covers the whole frame constrains nothing: strikes are uniform over the frame.
  if (radius_ * radius_ >= 0.25 * (rows_ * rows_ + cols_ * cols_)) radius_ = 0.0;
  if (specimen != nullptr && radius_ > 0.0) {
    specimen_ = true;
    scattered_ = specimen->scattered;
    centre_row_ += specimen->shift_row;
    centre_col_ += specimen->shift_col;
    ring_inner2_ = kRingInnerRadii * kRingInnerRadii * radius_ * radius_;
    ring_outer2_ = kRingOuterRadii * kRingOuterRadii * radius_ * radius_;
  }
}

Electron FrameElectrons::next() {
  if (radius_ <= 0.0) return Electron{stream_.uniform() * rows_, stream_.uniform() * cols_};
  // Only a specimen draws the choice of disk or ring: without one the draws stay those of a
  // simulator that never had a specimen, and so do the frames.
  const bool ring = specimen_ && stream_.uniform() < scattered_;
  for (int draw = 0; draw < kMaxDiskDraws; ++draw) {
    // Uniform over the disk, or over the annulus between the ring's radii.
    const double rho = ring ? std::sqrt(ring_inner2_ + (ring_outer2_ - ring_inner2_) * stream_.uniform())
                            : radius_ * std::sqrt(stream_.uniform());
    const double theta = kTwoPi * stream_.uniform();
    const Electron e{centre_row_ + rho * std::sin(theta), centre_col_ + rho * std::cos(theta)};
    if (e.row >= 0.0 && e.row < rows_ && e.col >= 0.0 && e.col < cols_) return e;
  }
  return Electron{0.5 * rows_, 0.5 * cols_};
}

int footprint_radius(double spread_px) { return static_cast<int>(std::ceil(3.0 * spread_px)); }

void compute_footprint(const Electron& electron, double spread_px, Footprint& out) {
  const int radius = footprint_radius(spread_px);
  out.span = 2 * radius + 1;
  axis_weights(electron.row, spread_px, radius, out.row0, out.row_weight);
  axis_weights(electron.col, spread_px, radius, out.col0, out.col_weight);
}

}  // namespace sectorflow::simulator
