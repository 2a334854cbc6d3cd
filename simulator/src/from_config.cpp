#include "sectorflow/simulator/from_config.hpp"

namespace sectorflow::simulator {

SimulatorSettings simulator_settings(const configs::Beamline& beamline) {
  SimulatorSettings settings;
  settings.seed = beamline.whole<std::uint64_t>("simulator.seed");
  settings.dose_per_frame = beamline.number("simulator.dose_per_frame");
  settings.electron_adu = beamline.number("simulator.electron_adu");
  settings.electron_spread_px = beamline.number("simulator.electron_spread_px");
  settings.dark_mean_adu = beamline.number("simulator.dark_mean_adu");
  settings.dark_sigma_adu = beamline.number("simulator.dark_sigma_adu");
  settings.bright_field_radius_px = beamline.number("simulator.bright_field_radius_px");
  settings.dropped_fraction = beamline.number("simulator.dropped_fraction");
  // The schema allows only these two names.
  settings.specimen = beamline.text("simulator.specimen") == "crystal" ? SpecimenKind::kCrystal : SpecimenKind::kNone;
  settings.specimen_grain_px = beamline.number("simulator.specimen_grain_px");
  settings.specimen_bright_field = beamline.number("simulator.specimen_bright_field");
  settings.specimen_dark_field = beamline.number("simulator.specimen_dark_field");
  settings.specimen_shift_px = beamline.number("simulator.specimen_shift_px");
  // The schema bounds each key; what the generator supports besides (an electron spread of at most
  // 10 px, say) is the settings' own check, one line naming the setting.
  settings.validate();
  return settings;
}

}  // namespace sectorflow::simulator
