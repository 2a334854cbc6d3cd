"""The NodeGroup's virtual images (virtual_images.hpp, through sectorflow.nodegroup.virtual_images)
against the same detectors written in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from sectorflow.nodegroup import NodeGroupError, VirtualDetectors, virtual_images

ROWS, COLS = 48, 40


def reference(detectors: VirtualDetectors, frames: list[np.ndarray]) -> dict[str, np.ndarray]:
    out: dict[str, list[float]] = {"bright_field": [], "dark_field": [], "com_x": [], "com_y": []}
    for events in frames:
        dr = events // COLS + 0.5 - detectors.centre_row
        dc = events % COLS + 0.5 - detectors.centre_col
        d = np.hypot(dr, dc)
        out["bright_field"].append(np.count_nonzero(d <= detectors.bright_field_radius))
        out["dark_field"].append(np.count_nonzero((d >= detectors.dark_field_inner) & (d <= detectors.dark_field_outer)))
        out["com_x"].append(dc.mean() if len(events) else np.nan)
        out["com_y"].append(dr.mean() if len(events) else np.nan)
    return {name: np.array(values) for name, values in out.items()}


def test_images_equal_the_numpy_reference_frame_by_frame() -> None:
    rng = np.random.default_rng(5)
    frames = [np.unique(rng.integers(0, ROWS * COLS, rng.integers(0, 60))).astype(np.uint32) for _ in range(200)]
    frames[3] = np.zeros(0, np.uint32)  # a frame without electrons: no centre of mass
    detectors = VirtualDetectors(centre_row=23.0, centre_col=21.5, bright_field_radius=7.0, dark_field_inner=9.0,
                                 dark_field_outer=18.0)
    events = np.concatenate(frames)
    offsets = np.concatenate([[0], np.cumsum([len(f) for f in frames])]).astype(np.uint64)
    images = virtual_images(detectors, ROWS, COLS, events, offsets)
    expected = reference(detectors, frames)
    np.testing.assert_array_equal(images["bright_field"], expected["bright_field"])
    np.testing.assert_array_equal(images["dark_field"], expected["dark_field"])
    np.testing.assert_allclose(images["com_x"], expected["com_x"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(images["com_y"], expected["com_y"], rtol=1e-5, atol=1e-5)
    assert np.isnan(images["com_x"][3])
    np.testing.assert_array_equal(images["diffraction"], np.bincount(events, minlength=ROWS * COLS))


def test_bad_detectors_and_events_are_refused_with_one_line() -> None:
    with pytest.raises(NodeGroupError, match="dark_field_outer_px"):
        VirtualDetectors(centre_row=1, centre_col=1, bright_field_radius=1, dark_field_inner=5, dark_field_outer=2)
    good = VirtualDetectors(centre_row=1, centre_col=1, bright_field_radius=1, dark_field_inner=2, dark_field_outer=3)
    with pytest.raises(NodeGroupError, match="outside the frame"):
        virtual_images(good, 4, 4, np.array([16], np.uint32), np.array([0, 1], np.uint64))
