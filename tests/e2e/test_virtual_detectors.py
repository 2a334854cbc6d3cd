"""Virtual detectors added in the configuration, with no code changed: a rectangle named ``probe``
and a mask file's pixels named ``grains`` beside the shipped bright and dark field are images of the
scan's file, of the live stream, of ``sectorflow view --png`` and of the dashboard's API, and each
detector's image equals what numpy counts from the file's own events."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
from watched_scan import complete_file, watch_scan

from sectorflow.dashboard.outline import mask_outline

DETECTOR = {"frame_rows": 128, "frame_cols": 128, "sector_rows": 32, "sector_cols": 128}
SCAN, SCAN_X, SCAN_Y = 5, 16, 12
SIMULATOR = {"bright_field_radius_px": 20.0, "dose_per_frame": 80.0, "specimen": "crystal", "specimen_grain_px": 4.0,
             "specimen_bright_field": 0.6, "specimen_dark_field": 0.25, "specimen_shift_px": 4.0}
# The shipped two, and a rectangle off the centre across the disk's edge (rows 40-69, columns 70-89).
DETECTORS = [{"name": "bright_field", "kind": "disk", "radius": 24.5},
             {"name": "dark_field", "kind": "annulus", "inner": 25.5, "outer": 56.0},
             {"name": "probe", "kind": "rectangle", "row0": 40, "col0": 70, "rows": 30, "cols": 20}]
NAMES = ["bright_field", "dark_field", "probe", "grains"]
# The mask: every third column of the lower half of the frame (the ring's and the disk's lower parts).
MASK = np.zeros((128, 128), bool)
MASK[64:, ::3] = True


def numpy_image(events: list[np.ndarray], detector: dict[str, Any]) -> np.ndarray:
    """Electrons per position inside ``detector``, from the file's events (pixel (r, c) at the point
    (r, c) for the round ones, around the frame centre: analysis/SPEC.md)."""
    out = np.zeros(len(events))
    for position, frame in enumerate(events):
        rows, cols = np.asarray(frame, np.int64) // 128, np.asarray(frame, np.int64) % 128
        if detector["kind"] == "mask":
            inside = MASK[rows, cols]
        elif detector["kind"] == "rectangle":
            inside = ((rows >= detector["row0"]) & (rows < detector["row0"] + detector["rows"])
                      & (cols >= detector["col0"]) & (cols < detector["col0"] + detector["cols"]))
        else:
            distance = np.hypot(rows - 64, cols - 64)
            inside = distance <= detector["radius"] if detector["kind"] == "disk" else \
                (distance > detector["inner"]) & (distance <= detector["outer"])
        out[position] = np.count_nonzero(inside)
    return out.reshape(SCAN_Y, SCAN_X)


def test_a_rectangle_added_in_the_configuration_is_an_image_everywhere(make_config, tmp_path: Path) -> None:
    np.save(tmp_path / "grains.npy", MASK)
    detectors = [*DETECTORS, {"name": "grains", "kind": "mask", "mask": str(tmp_path / "grains.npy")}]
    config, path = make_config(
        detector=DETECTOR, simulator=SIMULATOR, counting={"background_threshold": 30.0, "xray_threshold": 1000.0},
        analysis={"virtual_detectors": detectors, "live_rate_hz": 5.0}, dashboard={"update_ms": 200})
    output = tmp_path / "h5"
    watched = watch_scan(config, path, tmp_path, output, SCAN, SCAN_X, SCAN_Y, "probe")
    views, view_out, view_err, png = watched.views, watched.view_out, watched.view_err, watched.png
    images, probe_png = watched.images, watched.image_png

    counted = complete_file(output, SCAN)  # stempy still opens it
    # The file: each detector's image where the shipped two always were, in the configured order,
    # with its geometry; and equal to numpy's count from the file's events.
    assert list(counted.images) == [*NAMES, "com_x", "com_y", "diffraction"]
    assert counted.detectors["probe"] == {"kind": "rectangle", "row0": 40, "col0": 70, "rows": 30, "cols": 20}
    assert counted.detectors["bright_field"]["kind"] == "disk" and counted.detectors["bright_field"]["radius"] == 24.5
    assert counted.detectors["grains"] == {"kind": "mask", "mask_file": str(tmp_path / "grains.npy"),
                                           "pixels": int(MASK.sum())}
    for detector in detectors:
        expected = numpy_image(counted.events, detector)
        assert expected.sum() > 0 and expected.std() > 0, detector["name"]  # a real image, not a constant
        np.testing.assert_array_equal(counted.images[detector["name"]], expected, err_msg=detector["name"])

    # Live: the subscriber's last view carries the probe too, equal to the file's.
    final = views[-1]
    assert final.complete and list(final.images) == [*NAMES, "com_x", "com_y"]
    for name in NAMES:
        np.testing.assert_array_equal(final.images[name], counted.images[name].astype(np.float64), err_msg=name)

    # view --png: the text names each detector's image, and the PNG has a panel per image (the
    # four detectors, the centre of mass x and y, the summed pattern: 4.4 inches each at 80 dpi).
    assert watched.view_returncode == 0, view_out[-2000:] + view_err[-2000:]
    assert all(words in view_out for words in ("bright field", "dark field", "probe", "grains"))
    assert f"picture: {png}" in view_out
    width, height = struct.unpack(">II", png.read_bytes()[16:24])
    assert width == round(4.4 * 7 * 80), (width, height)

    # The dashboard's API: the probe among the images, labelled, its range the file's; its PNG served.
    assert images["names"][:4] == NAMES and "probe" in images["labels"]
    probe = counted.images["probe"]
    assert images["ranges"]["probe"] == [float(probe.min()), float(probe.max())]
    assert list(images["detectors"]["detectors"]) == NAMES
    assert images["detectors"]["detectors"]["probe"] == {"kind": "rectangle", "row0": 40, "col0": 70, "rows": 30,
                                                         "cols": 20}
    assert probe_png.startswith(b"\x89PNG")
    # The mask's outline, for the page to draw on the summed pattern: the edges of its pixels.
    assert images["detectors"]["detectors"]["grains"]["outline"] == mask_outline(MASK)
