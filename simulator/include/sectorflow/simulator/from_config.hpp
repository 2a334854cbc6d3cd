// The [simulator] table of a beamline file as SimulatorSettings: the one mapping of those keys,
// which simulator/from_config.py calls too.
#pragma once

#include "sectorflow/configs/beamline.hpp"
#include "sectorflow/simulator/settings.hpp"

namespace sectorflow::simulator {

/// [simulator], all but rate_hz (the pacer's) and first_frame (a scan request's).
SimulatorSettings simulator_settings(const configs::Beamline& beamline);

}  // namespace sectorflow::simulator
