"""An analysis added through the registry (analysis/radial_profile.py, listed in
``[analysis] analyses``): the radial profile per probe position is in the scan's file at
/analysis/radial_profile and equals numpy's from the file's own events, arrives live equal to the
file's, and ``sectorflow view`` and the dashboard show it."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from watched_scan import complete_file, watch_scan


DETECTOR = {"frame_rows": 128, "frame_cols": 128, "sector_rows": 32, "sector_cols": 128}
SCAN, SCAN_X, SCAN_Y = 6, 14, 10
SIMULATOR = {"bright_field_radius_px": 20.0, "dose_per_frame": 80.0, "specimen": "crystal", "specimen_grain_px": 4.0,
             "specimen_bright_field": 0.6, "specimen_dark_field": 0.25, "specimen_shift_px": 4.0}
DETECTORS = [{"name": "bright_field", "kind": "disk", "radius": 24.5},
             {"name": "dark_field", "kind": "annulus", "inner": 25.5, "outer": 56.0}]
RING_WIDTH_PX = 2.0


def numpy_profile(events: list[np.ndarray]) -> np.ndarray:
    """Electrons per 2 px ring around the frame centre (pixel (r, c) at the point (r, c)), per position."""
    yy, xx = np.indices((128, 128))
    ring = (np.hypot(yy - 64, xx - 64) / RING_WIDTH_PX).astype(np.int64).ravel()
    rings = int(ring.max()) + 1
    return np.stack([np.bincount(ring[np.asarray(e, np.int64)], minlength=rings) for e in events]).reshape(
        SCAN_Y, SCAN_X, rings)


def test_the_radial_profile_added_through_the_registry_is_in_the_file_live_in_view_and_on_the_page(
        make_config, tmp_path: Path) -> None:
    config, path = make_config(
        detector=DETECTOR, simulator=SIMULATOR, counting={"background_threshold": 30.0, "xray_threshold": 1000.0},
        analysis={"virtual_detectors": DETECTORS, "analyses": ["radial_profile"], "live_rate_hz": 5.0},
        dashboard={"update_ms": 200})
    output = tmp_path / "h5"
    watched = watch_scan(config, path, tmp_path, output, SCAN, SCAN_X, SCAN_Y, "radial_profile")
    views, view_out, view_err, png = watched.views, watched.view_out, watched.view_err, watched.png
    images, profile_png = watched.images, watched.image_png

    counted = complete_file(output, SCAN)  # stempy still opens it
    # The file: the built-in outputs where they always were, the profile after them, equal to numpy's.
    assert list(counted.images) == ["bright_field", "dark_field", "com_x", "com_y", "diffraction", "radial_profile"]
    expected = numpy_profile(counted.events)
    profile = counted.images["radial_profile"]
    assert profile.shape == expected.shape == (SCAN_Y, SCAN_X, 46)  # to the corner pixel (0, 0): 64 * sqrt(2) / 2
    assert expected.sum() == sum(len(e) for e in counted.events) > 0
    np.testing.assert_array_equal(profile, expected)
    assert counted.outputs["radial_profile"].unit == "electrons"

    # Live: the subscriber's last view has the profile, computed from the messages' events, equal to the file's.
    final = views[-1]
    assert final.complete and final.images["radial_profile"].shape == expected.shape
    np.testing.assert_array_equal(final.images["radial_profile"], expected.astype(np.float64))

    # view --png: a line of the profile's mean, and a panel per output (2 detectors, the centre of
    # mass x and y, the summed pattern, the radial profile: 4.4 inches each at 80 dpi).
    assert watched.view_returncode == 0, view_out[-2000:] + view_err[-2000:]
    assert "radial profile (2 px rings), mean over positions (electrons):" in view_out
    width, _ = struct.unpack(">II", png.read_bytes()[16:24])
    assert width == round(4.4 * 6 * 80), width

    # The dashboard: the profile among the images, labelled and with its range; its PNG served.
    assert images["names"] == ["bright_field", "dark_field", "com_x", "com_y", "radial_profile", "com_magnitude",
                               "diffraction"]
    assert images["labels"]["radial_profile"] == ["radial profile (2 px rings)", "electrons"]
    assert images["ranges"]["radial_profile"] == [float(expected.min()), float(expected.max())]
    assert profile_png.startswith(b"\x89PNG")
