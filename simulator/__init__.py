"""The detector simulator: the sectors of a scan as a 4D-STEM detector would read them out.

Sector s of frame f of scan n is a pure function of (seed, n, f, s), so any thread may generate
any sector in any order. The generator is C++ (``Simulator``); ``simulator_from_config`` builds it
from a configuration, ``simulate_scan`` runs a whole scan (optionally into raw v5 files).
"""

from sectorflow._core.simulator import Pacer, Simulator, SimulatorError, SimulatorSettings

from .from_config import pacer_from_config, settings_from_config, simulator_from_config
from .scan import ScanSummary, parse_scan_shape, simulate_scan
from .specimen import specimen_maps

__all__ = [
    "Pacer",
    "ScanSummary",
    "Simulator",
    "SimulatorError",
    "SimulatorSettings",
    "pacer_from_config",
    "parse_scan_shape",
    "settings_from_config",
    "simulate_scan",
    "simulator_from_config",
    "specimen_maps",
]
