"""The microscope's settings in a scan's file: the configuration's [instrument] and the acquire's own
options (--scan-step-nm, ...) are recorded under /metadata/instrument, each quantity with its value,
units and where it came from; ``sectorflow view`` (live, and of the file) and the dashboard's scan show them."""

from __future__ import annotations

from pathlib import Path

import h5py
import stempy.io
from support import Processes, sectorflow_command, stack_up, wait_until
from watched_scan import dashboard_state

from sectorflow.consumer.nodegroup import scan_file_name

DETECTOR = {"frame_rows": 128, "frame_cols": 128, "sector_rows": 32, "sector_cols": 128}
SIMULATOR = {"bright_field_radius_px": 20.0, "dose_per_frame": 80.0}
COUNTING = {"background_threshold": 30.0, "xray_threshold": 1000.0}
INSTRUMENT = {"scan_step_nm": 1.0, "detector_pixel_um": 10.0, "camera_length_mm": 200.0, "beam_energy_kev": 300.0}
SCAN = 4


def test_the_files_instrument_settings_come_from_the_configuration_and_the_acquire_with_units(
        make_config, processes: Processes, tmp_path: Path) -> None:
    config, path = make_config(detector=DETECTOR, simulator=SIMULATOR, counting=COUNTING, instrument=INSTRUMENT,
                               dashboard={"update_ms": 200})
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output) as client:
        # A live view of the scan, following it from its first frames.
        viewer = processes.sectorflow("view", "--config", str(path), "--scan", str(SCAN), "--timeout", "120",
                                      name="view")
        wait_until(lambda: sum(int(s.extra.get("live_images_subscribers", 0))
                               for s in client.statuses("nodegroup").values()) >= 2, 30,
                   "the live view subscribed to both NodeGroups")
        acquired = sectorflow_command("acquire", "--config", str(path), "--scan-number", str(SCAN), "--scan-shape",
                                      "16x12", "--scan-step-nm", "2.5", "--convergence-mrad", "25", "--wait",
                                      "--timeout", "120")
        assert acquired.returncode == 0, acquired.stdout + acquired.stderr
        scan = wait_until(lambda: next((s for s in dashboard_state(config.dashboard.url()).get("recent", [])
                                        if s["scan"] == SCAN and s["instrument"]), None), 30,
                          "the dashboard to show the scan's instrument")
        refused = sectorflow_command("acquire", "--config", str(path), "--scan-shape", "4x4", "--beam-energy-kev", "-3")
        wait_until(lambda: viewer.poll() is not None, 120, "the live view to end with the scan")
        live = processes.output(viewer)

    file = output / scan_file_name(SCAN)
    with h5py.File(file, "r") as f:
        recorded = {name: dict(group.attrs) for name, group in f["metadata/instrument"].items()}
    assert recorded == {
        "scan_step": {"value": 2.5, "units": "nm", "source": "acquire"},
        "detector_pixel": {"value": 10.0, "units": "um", "source": "configuration"},
        "camera_length": {"value": 200.0, "units": "mm", "source": "configuration"},
        "beam_energy": {"value": 300.0, "units": "keV", "source": "configuration"},
        "convergence": {"value": 25.0, "units": "mrad", "source": "acquire"},
        "detector_pixel_angle": {"value": 0.05, "units": "mrad", "source": "configuration"},
    }
    stempy.io.load_electron_counts(str(file))  # stempy still opens the file
    line = ("instrument: scan step 2.5 nm, detector pixel 10 um, camera length 200 mm, beam energy 300 keV, "
            "convergence 25 mrad, detector pixel angle 0.05 mrad")
    view = sectorflow_command("view", str(file))
    assert view.returncode == 0, view.stderr
    assert line in view.stdout.splitlines(), view.stdout
    assert viewer.returncode == 0 and line in live.splitlines(), live[-3000:]  # live, before the file
    assert scan["instrument"] == recorded
    assert refused.returncode == 2 and "--beam-energy-kev '-3': expected a number from 0.0 to inf" in refused.stderr, \
        refused.stderr
