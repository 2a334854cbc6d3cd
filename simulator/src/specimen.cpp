#include "sectorflow/simulator/specimen.hpp"

#include <cmath>
#include <limits>

#include "sectorflow/simulator/random.hpp"

namespace sectorflow::simulator {
namespace {

constexpr double kTwoPi = 6.28318530717958647692;
// Independent random domain of the specimen under the seed (simulator.cpp uses 1 to 3).
constexpr std::uint64_t kSpecimenDomain = 4;
// Thickness varies over this many grains along x and y: slower than the grains, so the bright-
// field image shows both.
constexpr double kThicknessPeriodX = 4.0;
constexpr double kThicknessPeriodY = 3.0;

// A grid cell index as an unsigned key (cells of negative index never occur: x, y >= 0, but the
// 3 x 3 search reaches cell -1).
std::uint64_t cell_key(std::int64_t i) { return static_cast<std::uint64_t>(i + (std::int64_t{1} << 40)); }

}  // namespace

Specimen::Specimen(const SimulatorSettings& settings)
    : kind_(settings.specimen),
      root_(derive(settings.seed.value_or(0), kSpecimenDomain)),
      grain_px_(settings.specimen_grain_px),
      bright_field_(settings.specimen_bright_field),
      dark_field_(settings.specimen_dark_field),
      shift_px_(settings.specimen_shift_px),
      phase_x_(kTwoPi * to_unit(derive(root_, 1))),
      phase_y_(kTwoPi * to_unit(derive(root_, 2))) {}

SpecimenPoint Specimen::at(std::uint32_t x, std::uint32_t y) const {
  if (empty()) return {};
  // Nearest jittered grid point among the 3 x 3 cells around the position: its grain.
  const double px = (x + 0.5) / grain_px_;
  const double py = (y + 0.5) / grain_px_;
  const auto ci = static_cast<std::int64_t>(std::floor(px));
  const auto cj = static_cast<std::int64_t>(std::floor(py));
  double best = std::numeric_limits<double>::infinity();
  std::uint64_t grain = 0;
  for (std::int64_t i = ci - 1; i <= ci + 1; ++i) {
    for (std::int64_t j = cj - 1; j <= cj + 1; ++j) {
      const std::uint64_t key = derive(derive(derive(root_, 3), cell_key(i)), cell_key(j));
      const double gx = static_cast<double>(i) + to_unit(derive(key, 1)) - px;
      const double gy = static_cast<double>(j) + to_unit(derive(key, 2)) - py;
      const double d2 = gx * gx + gy * gy;
      if (d2 < best) {
        best = d2;
        grain = key;
      }
    }
  }
  const double thickness = 0.5 + 0.25 * (std::sin(kTwoPi * px / kThicknessPeriodX + phase_x_) +
                                         std::sin(kTwoPi * py / kThicknessPeriodY + phase_y_));
  const double strength = to_unit(derive(grain, 3));
  const double angle = kTwoPi * to_unit(derive(grain, 4));
  SpecimenPoint point;
  point.transmission = 1.0 - bright_field_ * thickness;
  point.scattered = dark_field_ * strength;
  point.shift_row = shift_px_ * std::sin(angle);
  point.shift_col = shift_px_ * std::cos(angle);
  return point;
}

}  // namespace sectorflow::simulator
