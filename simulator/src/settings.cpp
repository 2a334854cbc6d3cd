#include "sectorflow/simulator/settings.hpp"

#include <cmath>
#include <sstream>
#include <string>

namespace sectorflow::simulator {
namespace {

void check(const char* name, double value, double low, double high) {
  if (std::isfinite(value) && value >= low && value <= high) return;
  if (std::isnan(value)) {
    throw SimulatorError(std::string("simulator setting '") + name + "' is not set ([simulator] " + name + ")");
  }
  std::ostringstream message;
  message << "simulator setting '" << name << "' = " << value << ": expected a value from " << low << " to "
          << high;
  throw SimulatorError(message.str());
}

}  // namespace

void SimulatorSettings::validate() const {
  if (!seed) throw SimulatorError("simulator setting 'seed' is not set ([simulator] seed)");
  constexpr double kHuge = 1.0e12;
  check("dose_per_frame", dose_per_frame, 0.0, kMaxDosePerFrame);
  check("electron_adu", electron_adu, 0.0, kHuge);
  check("electron_spread_px", electron_spread_px, 0.0, kMaxElectronSpreadPx);
  check("dark_mean_adu", dark_mean_adu, 0.0, kHuge);
  check("dark_sigma_adu", dark_sigma_adu, 0.0, kHuge);
  check("bright_field_radius_px", bright_field_radius_px, 0.0, kHuge);
  check("dropped_fraction", dropped_fraction, 0.0, 1.0);
  check("specimen_grain_px", specimen_grain_px, 1.0, kHuge);
  check("specimen_bright_field", specimen_bright_field, 0.0, 1.0);
  check("specimen_dark_field", specimen_dark_field, 0.0, 1.0);
  check("specimen_shift_px", specimen_shift_px, 0.0, kHuge);
  if (specimen != SpecimenKind::kNone && !(bright_field_radius_px > 0.0)) {
    throw SimulatorError(
        "simulator setting 'specimen' = \"crystal\" needs a bright-field disk: set [simulator] bright_field_radius_px "
        "above 0");
  }
}

}  // namespace sectorflow::simulator
