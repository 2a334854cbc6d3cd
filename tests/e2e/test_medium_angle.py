"""A C++ kernel added through both registries (consumer/nodegroup/kernels/medium_angle.cpp and
analysis/medium_angle.py, listed in ``[analysis] analyses``): the medium-angle annulus per probe
position, computed by the NodeGroups' counting threads, is in the scan's file at
/analysis/medium_angle equal to numpy's from the file's own events, arrives live equal to the file's,
and the dashboard shows it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from watched_scan import complete_file, watch_scan

from sectorflow.analysis.medium_angle import SETTINGS

ROWS = COLS = 192
DETECTOR = {"frame_rows": ROWS, "frame_cols": COLS, "sector_rows": 48, "sector_cols": COLS}
SCAN, SCAN_X, SCAN_Y = 7, 12, 9
# A probe disk reaching past the annulus's inner radius (66 px): its rim lands in the annulus.
SIMULATOR = {"bright_field_radius_px": 72.0, "dose_per_frame": 80.0, "specimen": "crystal", "specimen_grain_px": 4.0,
             "specimen_bright_field": 0.6, "specimen_dark_field": 0.25, "specimen_shift_px": 4.0}
DETECTORS = [{"name": "bright_field", "kind": "disk", "radius": 60.0},
             {"name": "dark_field", "kind": "annulus", "inner": 90.0, "outer": 96.0}]


def numpy_annulus(events: list[np.ndarray]) -> np.ndarray:
    """Electrons at inner < distance <= outer from the frame centre (pixel (r, c) at the point (r, c)), per position."""
    yy, xx = np.indices((ROWS, COLS))
    d2 = ((yy - ROWS / 2) ** 2 + (xx - COLS / 2) ** 2).ravel()
    ring = (d2 > SETTINGS["inner_px"] ** 2) & (d2 <= SETTINGS["outer_px"] ** 2)
    return np.array([np.count_nonzero(ring[np.asarray(e, np.int64)]) for e in events]).reshape(SCAN_Y, SCAN_X)


def test_the_medium_angle_kernel_added_in_cpp_is_in_the_file_live_and_on_the_page(make_config, tmp_path: Path) -> None:
    config, path = make_config(
        detector=DETECTOR, simulator=SIMULATOR, counting={"background_threshold": 30.0, "xray_threshold": 1000.0},
        analysis={"virtual_detectors": DETECTORS, "analyses": ["medium_angle"], "live_rate_hz": 5.0},
        dashboard={"update_ms": 200})
    output = tmp_path / "h5"
    watched = watch_scan(config, path, tmp_path, output, SCAN, SCAN_X, SCAN_Y, "medium_angle")

    counted = complete_file(output, SCAN)  # stempy still opens it
    # The file: the built-in outputs where they always were, the annulus after them, equal to numpy's.
    assert list(counted.images) == ["bright_field", "dark_field", "com_x", "com_y", "diffraction", "medium_angle"]
    expected = numpy_annulus(counted.events)
    assert expected.sum() > 0 and (expected < np.array([len(e) for e in counted.events]).reshape(expected.shape)).any()
    np.testing.assert_array_equal(counted.images["medium_angle"], expected)
    assert counted.outputs["medium_angle"].unit == "electrons"

    # Live: the kernel's column in the images messages, merged by the subscriber, equal to the file's.
    final = watched.views[-1]
    assert final.complete
    np.testing.assert_array_equal(final.images["medium_angle"], expected.astype(np.float64))

    # The dashboard: the annulus among the images, labelled, its PNG served.
    images = watched.images
    assert "medium_angle" in images["names"]
    assert images["labels"]["medium_angle"] == ["medium-angle annulus (66-90 px)", "electrons"]
    assert watched.image_png.startswith(b"\x89PNG")
