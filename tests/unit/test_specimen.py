"""The simulated specimen: deterministic by seed, and the frames carry it where the ground truth
says (fewer electrons where it is thick, electrons in the ring where it scatters, the pattern
shifted by its grain)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sectorflow.configs import SimulatorConfig
from sectorflow.protocol import Geometry
from sectorflow.simulator import Simulator, SimulatorError, settings_from_config, specimen_maps

GEOMETRY = Geometry(64, 64, 16, 64, 2)
SCAN_X, SCAN_Y = 16, 12
SCAN = 2


def crystal(**values: Any) -> Any:
    return settings_from_config(SimulatorConfig(**{
        "bright_field_radius_px": 8.0, "dose_per_frame": 200.0, "specimen": "crystal", "specimen_grain_px": 4.0,
        "specimen_bright_field": 0.6, "specimen_dark_field": 0.5, "specimen_shift_px": 2.0, **values}))


def test_the_same_seed_gives_the_same_specimen_and_another_seed_another() -> None:
    a, b = specimen_maps(crystal(), SCAN_X, SCAN_Y), specimen_maps(crystal(), SCAN_X, SCAN_Y)
    other = specimen_maps(crystal(seed=2), SCAN_X, SCAN_Y)
    for name in ("transmission", "scattered", "shift_row", "shift_col"):
        np.testing.assert_array_equal(a[name], b[name])
        assert not np.array_equal(a[name], other[name]), name
        assert a[name].shape == (SCAN_Y, SCAN_X)
    # It varies over the scan: grains and thickness, within the configured strengths.
    assert a["transmission"].min() >= 0.4 - 1e-12 and a["transmission"].max() <= 1.0
    assert a["scattered"].std() > 0.05 and a["scattered"].max() <= 0.5
    assert np.allclose(np.hypot(a["shift_row"], a["shift_col"]), 2.0)


def test_frames_carry_the_specimen_where_the_ground_truth_says() -> None:
    settings = crystal()
    sim = Simulator(settings, GEOMETRY)
    truth = specimen_maps(settings, SCAN_X, SCAN_Y)
    counts = np.zeros((SCAN_Y, SCAN_X))
    ring = np.zeros((SCAN_Y, SCAN_X))
    com_row = np.zeros((SCAN_Y, SCAN_X))
    com_col = np.zeros((SCAN_Y, SCAN_X))
    for p in range(SCAN_X * SCAN_Y):
        electrons = sim.electrons(SCAN, p, scan_x=SCAN_X)
        y, x = divmod(p, SCAN_X)
        counts[y, x] = len(electrons)
        distance = np.hypot(electrons[:, 0] - 32 - truth["shift_row"][y, x], electrons[:, 1] - 32 - truth["shift_col"][y, x])
        ring[y, x] = np.count_nonzero(distance >= 12.0 - 1e-9)
        inside = distance < 8.0 + 1e-9
        com_row[y, x] = electrons[inside, 0].mean() - 32
        com_col[y, x] = electrons[inside, 1].mean() - 32
        assert np.count_nonzero(inside) + ring[y, x] == len(electrons)  # disk or ring, nothing between
    assert np.corrcoef(counts.ravel(), truth["transmission"].ravel())[0, 1] > 0.8
    assert np.corrcoef((ring / counts).ravel(), truth["scattered"].ravel())[0, 1] > 0.8
    assert np.corrcoef(com_row.ravel(), truth["shift_row"].ravel())[0, 1] > 0.9
    assert np.corrcoef(com_col.ravel(), truth["shift_col"].ravel())[0, 1] > 0.9


def test_sectors_and_frames_agree_with_a_specimen() -> None:
    sim = Simulator(crystal(), GEOMETRY)
    for p in (0, 5, 100):
        frame = sim.frame(SCAN, p, scan_x=SCAN_X)
        for s in range(GEOMETRY.n_sectors):
            np.testing.assert_array_equal(sim.sector(SCAN, p, s, scan_x=SCAN_X), frame[16 * s:16 * (s + 1)])


def test_a_specimen_needs_the_scan_width_and_a_disk() -> None:
    sim = Simulator(crystal(), GEOMETRY)
    with pytest.raises(SimulatorError, match="scan_x"):
        sim.frame(SCAN, 0)
    with pytest.raises(SimulatorError, match="bright_field_radius_px"):
        crystal(bright_field_radius_px=0.0)


def test_without_a_specimen_frames_are_those_of_before() -> None:
    # No specimen: the scan width changes nothing, and the identity maps say so.
    settings = settings_from_config(SimulatorConfig(bright_field_radius_px=8.0))
    sim = Simulator(settings, GEOMETRY)
    np.testing.assert_array_equal(sim.frame(SCAN, 3), sim.frame(SCAN, 3, scan_x=SCAN_X))
    maps = specimen_maps(settings, SCAN_X, SCAN_Y)
    assert (maps["transmission"] == 1).all() and (maps["scattered"] == 0).all()
