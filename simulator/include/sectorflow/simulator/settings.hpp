// What the simulated detector looks like: dose, electron signal, dark level, bright-field disk and
// sector loss. Filled from the [simulator] table of the configuration (configs/schema.py, which
// documents each field); the defaults here are the schema's.
#pragma once

#include <cstdint>
#include <stdexcept>

namespace sectorflow::simulator {

/// Invalid simulator settings or arguments; the message names the setting, the value and the limit.
class SimulatorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Largest electron_spread_px: a strike deposits within 3 spreads of its centre, and that
/// footprint is computed on the stack.
inline constexpr double kMaxElectronSpreadPx = 10.0;
/// Largest dose_per_frame: the count of a frame's electrons must fit in 32 bits.
inline constexpr double kMaxDosePerFrame = 1.0e9;

struct SimulatorSettings {
  std::uint64_t seed = 1;                ///< the same seed gives the same bytes
  double dose_per_frame = 20.0;          ///< mean electrons per frame (Poisson)
  double electron_adu = 200.0;           ///< signal of one electron in ADU, summed over its pixels
  double electron_spread_px = 0.7;       ///< Gaussian sigma of an electron's charge cloud, pixels
  double dark_mean_adu = 20.0;           ///< mean of the dark background
  double dark_sigma_adu = 2.2;           ///< standard deviation of the dark noise
  double bright_field_radius_px = 0.0;   ///< strikes inside this disk around the frame centre (0: anywhere)
  double dropped_fraction = 0.0;         ///< probability that a sector is lost upstream

  /// Throws SimulatorError naming the first setting that is negative, not finite or out of range.
  void validate() const;
};

}  // namespace sectorflow::simulator
