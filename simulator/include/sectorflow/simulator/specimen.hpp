// The specimen under the probe: what a simulated scan sees at each probe position. A "crystal" is
// grains (a Voronoi tessellation of jittered grid points, each grain with its own scattering
// strength and deflection direction) over a smoothly varying thickness. At probe position (x, y)
// it sets how many electrons reach the detector (thicker: fewer), which fraction of them are
// scattered into the dark-field ring, and how far the pattern is shifted (a deflection, as an
// electric field in the grain would give). A pure function of (seed, x, y): the ground truth that
// tests correlate the virtual images against.
#pragma once

#include <cstdint>

#include "sectorflow/simulator/settings.hpp"

namespace sectorflow::simulator {

/// The specimen at one probe position.
struct SpecimenPoint {
  double transmission = 1.0;  ///< fraction of the dose that reaches the detector
  double scattered = 0.0;     ///< of those, the fraction scattered into the dark-field ring
  double shift_row = 0.0;     ///< pattern shift on the detector, pixels
  double shift_col = 0.0;
};

class Specimen {
 public:
  /// Validated settings; a specimen of kind kNone is empty: at() returns the identity point.
  explicit Specimen(const SimulatorSettings& settings);

  bool empty() const { return kind_ == SpecimenKind::kNone; }

  /// The specimen at probe position (x, y): column x of row y of the scan.
  SpecimenPoint at(std::uint32_t x, std::uint32_t y) const;

 private:
  SpecimenKind kind_;
  std::uint64_t root_;
  double grain_px_;
  double bright_field_;
  double dark_field_;
  double shift_px_;
  double phase_x_;
  double phase_y_;
};

/// The dark-field ring of the simulated pattern: from this many bright-field radii...
inline constexpr double kRingInnerRadii = 1.5;
/// ... to this many.
inline constexpr double kRingOuterRadii = 2.5;

}  // namespace sectorflow::simulator
