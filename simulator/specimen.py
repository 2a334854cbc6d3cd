"""Ground truth of the simulated specimen: what each probe position of a scan saw."""

from __future__ import annotations

import numpy as np

from sectorflow._core.simulator import SimulatorSettings
from sectorflow._core.simulator import specimen_maps as _core_maps


def specimen_maps(settings: SimulatorSettings, scan_x: int, scan_y: int) -> dict[str, np.ndarray | float]:
    """The specimen over a ``scan_x`` x ``scan_y`` scan, (scan_y, scan_x) float64 arrays:

    - ``transmission``: fraction of the dose that reaches the detector at the position,
    - ``scattered``: of those, the fraction scattered into the dark-field ring,
    - ``bright_field``: expected fraction of the dose in the (shifted) disk, transmission x (1 - scattered),
    - ``dark_field``: expected fraction of the dose in the ring, transmission x scattered,
    - ``shift_row``, ``shift_col``: the pattern's shift on the detector in pixels (the expected centre
      of mass),

    and the ring's radii ``ring_inner_px``, ``ring_outer_px`` (floats). Without a specimen
    (``[simulator] specimen = "none"``) transmission is 1 and the rest 0.
    """
    maps = dict(_core_maps(settings, scan_x, scan_y))
    maps["bright_field"] = maps["transmission"] * (1.0 - maps["scattered"])
    maps["dark_field"] = maps["transmission"] * maps["scattered"]
    return maps
