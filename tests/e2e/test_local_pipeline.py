"""The README's main command and the supervised stack, from a file in configs/ to an HDF5 file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import wait_until

from sectorflow.consumer import read_counted_scan, scan_file_name
from sectorflow.pipeline import load_running

pytestmark = pytest.mark.mpi


def sectorflow(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def test_demo_runs_the_whole_pipeline_and_summarises_it(make_config, tmp_path: Path) -> None:
    _, path = make_config()
    output = tmp_path / "counted"
    result = sectorflow("demo", "--config", str(path), "--scan-shape", "12x8", "--output", str(output),
                        "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "scan 1: 12 x 8 probe positions, 96 frames, 0.06 GB raw"
    assert "frames complete: 96, incomplete: 0, missing: 0" in result.stdout
    h5 = output / scan_file_name(1)
    counted = read_counted_scan(h5)
    assert counted.scan_shape == (8, 12) and all(e is not None for e in counted.events)
    mean = float(np.mean([len(e) for e in counted.events]))
    assert f"electrons per frame: {mean:.1f} (mean)" in result.stdout
    png = h5.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Everything the demo started has stopped.
    assert not [s for s in load_running(tmp_path / "run") if Path(f"/proc/{s.pid}").exists()]


def test_up_acquire_down(make_config, tmp_path: Path) -> None:
    _, path = make_config()
    run_dir = tmp_path / "run"
    up = sectorflow("up", "--config", str(path), "--run-dir", str(run_dir), "--output", str(tmp_path / "h5"))
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        services = load_running(run_dir)
        assert [s.name for s in services] == ["kvstore", "aggregator", "nodegroups", "producer-0", "producer-1",
                                              "producer-2", "producer-3"]
        assert all((run_dir / f"{s.name}.log").exists() for s in services)
        for scan in (1, 2):
            acquired = sectorflow("acquire", "--config", str(path), "--scan-number", str(scan), "--scan-shape",
                                  "4x4", "--wait", "--timeout", "120")
            assert acquired.returncode == 0, acquired.stderr
            wait_until(lambda: (tmp_path / "h5" / scan_file_name(scan)).exists(), 60, f"scan {scan}'s file")
    finally:
        down = sectorflow("down", "--config", str(path), "--run-dir", str(run_dir))
    assert down.returncode == 0, down.stderr
    assert down.stdout.startswith("stopped 7 services")
    for service in services:
        assert not Path(f"/proc/{service.pid}").exists() or _zombie(service.pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_up_refuses_a_run_directory_with_running_services(make_config, tmp_path: Path) -> None:
    _, path = make_config()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "services.json").write_text(
        f'[{{"name": "kvstore", "pid": {os.getpid()}, "argv": ["x"], "log": "x.log"}}]')
    result = sectorflow("up", "--config", str(path), "--run-dir", str(run_dir))
    assert result.returncode == 1
    assert f"{run_dir} already has running services" in result.stderr
