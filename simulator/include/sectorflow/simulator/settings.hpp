// What the simulated detector looks like: dose, electron signal, dark level, bright-field disk and
// sector loss. Filled from the [simulator] table of the configuration (configs/schema.py, which
// documents each field) by simulator/from_config.py or sectorflow::simulator::simulator_settings:
// no field has a default here (NaN or no seed: not set), and validate() refuses one left unset.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
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

/// What lies under the probe: nothing (every position alike) or a crystal (specimen.hpp).
enum class SpecimenKind { kNone, kCrystal };

struct SimulatorSettings {
  static constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();

  std::optional<std::uint64_t> seed;         ///< the same seed gives the same bytes
  double dose_per_frame = kUnset;            ///< mean electrons per frame (Poisson)
  double electron_adu = kUnset;              ///< signal of one electron in ADU, summed over its pixels
  double electron_spread_px = kUnset;        ///< Gaussian sigma of an electron's charge cloud, pixels
  double dark_mean_adu = kUnset;             ///< mean of the dark background
  double dark_sigma_adu = kUnset;            ///< standard deviation of the dark noise
  double bright_field_radius_px = kUnset;    ///< strikes inside this disk around the frame centre (0: anywhere)
  double dropped_fraction = kUnset;          ///< probability that a sector is lost upstream
  SpecimenKind specimen = SpecimenKind::kNone;  ///< a crystal needs a bright-field disk (radius > 0)
  double specimen_grain_px = kUnset;         ///< mean grain size in probe positions
  double specimen_bright_field = kUnset;     ///< fraction of the dose the thickest part absorbs (0..1)
  double specimen_dark_field = kUnset;       ///< largest fraction scattered into the ring (0..1)
  double specimen_shift_px = kUnset;         ///< pattern shift by a grain, detector pixels

  /// Throws SimulatorError naming the first setting that is not set, negative, not finite or out
  /// of range.
  void validate() const;
};

}  // namespace sectorflow::simulator
