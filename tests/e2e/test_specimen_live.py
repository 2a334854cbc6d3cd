"""A scan of a simulated specimen through the whole stack: the NodeGroups' virtual images in the
file equal the live view's at the end, follow the specimen (and would not if the positions were
shuffled), the centre of mass follows the simulated shift, the events still equal stempy's
counting, and a subscriber that never reads changes nothing."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import stempy.image as stim
import stempy.io
import zmq
from support import stack_up, sectorflow_command, wait_until

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.live import LiveView, subscribe
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.simulator import simulator_from_config, specimen_maps

DETECTOR = {"frame_rows": 128, "frame_cols": 128, "sector_rows": 32, "sector_cols": 128}
BACKGROUND, XRAY = 30.0, 1000.0
SCAN_X, SCAN_Y = 24, 20
SCAN = 7
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "radial_profile.py"
# Disk of 20 px, ring from 30 to 50 px, shifts of 4 px: the detectors hold the disk wherever it
# moves and the ring's inside; electrons sparse enough to be counted one by one.
SIMULATOR = {"bright_field_radius_px": 20.0, "dose_per_frame": 80.0, "specimen": "crystal", "specimen_grain_px": 4.0,
             "specimen_bright_field": 0.6, "specimen_dark_field": 0.25, "specimen_shift_px": 4.0}
ANALYSIS = {"virtual_detectors": [{"name": "bright_field", "kind": "disk", "radius": 24.5},
                                  {"name": "dark_field", "kind": "annulus", "inner": 25.5, "outer": 56.0}],
            "live_rate_hz": 5.0}


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def test_virtual_images_follow_the_specimen_in_the_file_and_the_live_view(make_config, tmp_path: Path) -> None:
    config, path = make_config(detector=DETECTOR, simulator=SIMULATOR, analysis=ANALYSIS,
                               counting={"background_threshold": BACKGROUND, "xray_threshold": XRAY})
    output = tmp_path / "h5"
    views: list[LiveView] = []
    with stack_up(config, path, tmp_path / "run", output) as client:
        def subscribers(topic: str) -> int:
            return sum(int(s.extra.get(f"live_{topic}_subscribers", 0)) for s in client.statuses("nodegroup").values())

        # A subscriber that never reads, with the smallest queue, on both streams of both NodeGroups.
        context = zmq.Context.instance()
        idle = []
        for status in client.statuses("nodegroup").values():
            for stream in ("live_images", "live_frames"):
                socket = context.socket(zmq.DEALER)
                socket.setsockopt(zmq.RCVHWM, 1)
                socket.setsockopt(zmq.LINGER, 0)
                socket.connect(status.extra[stream])
                socket.send(b"subscribe")
                idle.append(socket)
        live = threading.Thread(target=lambda: views.extend(subscribe(path, scan=SCAN, timeout_s=120)))
        # Another analysis on the counted frames: the shipped example.
        analysis = subprocess.Popen([sys.executable, str(EXAMPLE), "--config", str(path), "--scan", str(SCAN),
                                     "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # And a person watching in a terminal.
        viewer = subprocess.Popen([sys.executable, "-m", "sectorflow", "view", "--config", str(path), "--scan",
                                   str(SCAN), "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        try:
            live.start()
            # Every subscription has reached both NodeGroups before the scan starts.
            wait_until(lambda: subscribers("images") >= 6 and subscribers("frames") >= 4, 30,
                       "the subscribers to reach both NodeGroups")
            acquired = sectorflow_command("acquire", "--config", str(path), "--scan-number", str(SCAN),
                                          "--scan-shape", f"{SCAN_X}x{SCAN_Y}", "--wait", "--timeout", "120")
            assert acquired.returncode == 0, acquired.stdout + acquired.stderr
            wait_until(lambda: (output / scan_file_name(SCAN)).exists(), 60, "the scan's file")
            live.join(130)
            profile_out, profile_err = analysis.communicate(timeout=130)
            view_out, view_err = viewer.communicate(timeout=130)
        finally:
            for socket in idle:
                socket.close(0)
            for process in (analysis, viewer):
                if process.poll() is None:
                    process.kill()
                    process.wait()
    assert not live.is_alive()

    counted = read_counted_scan(output / scan_file_name(SCAN))
    assert counted.metadata["completeness"]["outcome"] == "complete"
    # stempy opens the file and sees the scan.
    sparse = stempy.io.load_electron_counts(str(output / scan_file_name(SCAN)))
    assert sparse.scan_shape[::-1] == (SCAN_Y, SCAN_X) or sparse.scan_shape == (SCAN_Y, SCAN_X)
    # Events still equal stempy's counting of the simulated frames (now with a specimen).
    simulator = simulator_from_config(config)
    dark = np.zeros((128, 128), np.float32)
    for position in range(0, SCAN_X * SCAN_Y, 7):
        frame = simulator.frame(SCAN, position, scan_x=SCAN_X)
        expected = stim.electron_count_frame(frame, darkreference=dark, background_threshold=BACKGROUND,
                                             xray_threshold=XRAY).data[0, 0]
        np.testing.assert_array_equal(counted.events[position], expected, err_msg=f"position {position}")

    # The live view's last view is the whole scan, and equal to the file's images.
    final = views[-1]
    assert final.complete and final.positions_counted == SCAN_X * SCAN_Y
    assert len(views) >= 1
    assert list(final.images) == ["bright_field", "dark_field", "com_x", "com_y"]
    assert [name for name in counted.images if name != "diffraction"] == list(final.images)
    for name in final.images:
        np.testing.assert_array_equal(final.images[name], counted.images[name].astype(np.float64), err_msg=name)
    np.testing.assert_array_equal(final.diffraction, counted.images["diffraction"].astype(np.int64))
    # The terminal view ends with the whole scan.
    assert viewer.returncode == 0, view_out[-2000:] + view_err[-2000:]
    assert f"scan {SCAN}: {SCAN_X * SCAN_Y} of {SCAN_X * SCAN_Y} positions counted (complete)" in view_out
    assert "bright field" in view_out and "dark field" in view_out

    # The analysis on the frames stream saw every counted frame: its radial profile is the file's.
    assert analysis.returncode == 0, profile_out + profile_err
    assert f"{SCAN_X * SCAN_Y} of {SCAN_X * SCAN_Y} frames seen" in profile_out
    profile = [float(line.split()[2]) for line in profile_out.splitlines() if line.endswith("electrons/pixel")]
    yy, xx = np.indices((128, 128))
    ring_of_pixel = (np.hypot(yy - 64, xx - 64) / 2.0).astype(np.int64).ravel()  # pixel (r, c) is the point (r, c)
    expected = np.bincount(ring_of_pixel, weights=counted.images["diffraction"].ravel().astype(np.float64))
    np.testing.assert_allclose(profile, expected / np.bincount(ring_of_pixel), atol=1e-4)

    # The images follow the specimen; the same image with its positions shuffled does not.
    truth = specimen_maps(simulator.settings, SCAN_X, SCAN_Y)
    bright = counted.images["bright_field"]
    assert correlation(bright, truth["bright_field"]) > 0.8, correlation(bright, truth["bright_field"])
    shuffled = np.random.default_rng(1).permutation(bright.ravel()).reshape(bright.shape)
    assert correlation(shuffled, truth["bright_field"]) < 0.3
    assert correlation(counted.images["dark_field"], truth["dark_field"]) > 0.8
    # The centre of mass of all electrons, the ring's included (noisier than the disk alone).
    assert correlation(counted.images["com_x"], truth["shift_col"]) > 0.7
    assert correlation(counted.images["com_y"], truth["shift_row"]) > 0.7
