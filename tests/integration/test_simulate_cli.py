"""``sectorflow simulate``: its summary, and one-line errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def simulate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", "simulate", *args],
                          capture_output=True, text=True, timeout=120)


def test_summary_reports_frames_bytes_rate_dose_and_dropped_sectors(make_config) -> None:
    # 2 x 2 tiles of 16 x 16: nothing in the CLI assumes the 4D Camera.
    _, config = make_config(detector={"frame_rows": 32, "frame_cols": 32, "sector_rows": 16, "sector_cols": 16},
                            simulator={"dropped_fraction": 0.5})
    result = simulate("--config", str(config), "--scan-shape", "6x5", "--scan-number", "2")
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert line.startswith("scan 2: 30 frames (6 x 5) of 4 sectors, ")
    assert " GB/s), " in line and " electrons per frame, " in line and " sectors dropped" in line
    dropped = int(line.split(", ")[-1].split()[0])
    assert 0 < dropped < 120


@pytest.mark.parametrize("shape, message", [
    ("8by8", "scan shape '8by8': expected XxY with two positive integers, e.g. 128x128"),
    ("0x8", "scan shape '0x8': both sides must be from 1 to 65535, e.g. 128x128"),
    ("8x70000", "scan shape '8x70000': both sides must be from 1 to 65535, e.g. 128x128"),
])
def test_bad_scan_shape_is_one_line_and_a_failure(make_config, shape: str, message: str) -> None:
    _, config = make_config()
    result = simulate("--config", str(config), "--scan-shape", shape)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [f"sectorflow simulate: error: {message}"]


def test_existing_raw_files_are_not_overwritten(make_config, tmp_path: Path) -> None:
    _, config = make_config()
    out = tmp_path / "raw"
    assert simulate("--config", str(config), "--scan-shape", "2x2", "--out", str(out)).returncode == 0
    again = simulate("--config", str(config), "--scan-shape", "2x2", "--out", str(out))
    assert again.returncode != 0
    last = again.stderr.strip().splitlines()[-1]
    assert last.startswith(f"sectorflow simulate: error: {out}/data_scan0000000001_module0_0.data: cannot create")
    assert "never overwritten" in last
