"""Two scans of one specimen on the shipped configuration's simulator (configs/local.toml's
[simulator] and [counting], 576 x 576 frames, two NodeGroup ranks): they count alike (once,
electrons per frame jumped 13 to 25% while the background threshold lay on 30 ADU), every
NodeGroup of both scans counts dark pixels alike (one set of thresholds per scan, fitted on rank 0
from both NodeGroups' samples: consumer/nodegroup/threshold_exchange.py), and a user who is not the NodeGroups' reads the
counted files (they were once mode 0600).

Pixel values are integers, so background thresholds count alike exactly when their integer parts
are equal. The scans' electrons per frame differ by the simulated specimen's own noise: 1.6% between
scans 1 and 2 at 48 x 48 (the simulator's truth), 3.8% at 24 x 24."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support import sectorflow_command, stack_up

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.consumer.nodegroup import scan_file_name

pytestmark = pytest.mark.mpi

SCAN_X, SCAN_Y = 48, 48
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
OTHER_USER = "nobody"
SAMPLE_FRAMES = 40  # configs/local.toml's [counting] threshold_sample_frames, by each NodeGroup


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user may enter (pytest's tmp_path is the test user's alone, mode 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="sectorflow-shared-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


def read_as_other_user(path: Path) -> subprocess.CompletedProcess:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.fail("reading as another user needs root and runuser (util-linux), which the test suite has")
    return subprocess.run(["runuser", "-u", OTHER_USER, "--", "head", "-c", str(len(HDF5_SIGNATURE)), str(path)],
                          capture_output=True, timeout=30)


def electrons_per_frame(path: Path) -> float:
    return float(np.mean([len(e) for e in read_counted_scan(path).events]))


def test_two_scans_of_one_specimen_count_alike_and_another_user_reads_them(make_config, tmp_path: Path,
                                                                            shared_dir: Path) -> None:
    # The shipped configuration's specimen and counting (make_config turns the specimen off for other tests).
    config, path = make_config(simulator={"specimen": "crystal"})
    output = shared_dir / "counted"
    previous = os.umask(0o022)  # the usual umask, which `sectorflow up` and the services inherit
    try:
        with stack_up(config, path, tmp_path / "run", output):
            for scan in (1, 2):
                acquired = sectorflow_command("acquire", "--config", str(path), "--scan-number", str(scan),
                                              "--scan-shape", f"{SCAN_X}x{SCAN_Y}", "--wait")
                assert acquired.returncode == 0, acquired.stdout + acquired.stderr
    finally:
        os.umask(previous)

    files = [output / scan_file_name(scan) for scan in (1, 2)]
    per_frame = [electrons_per_frame(file) for file in files]
    thresholds = [{float(part["background_threshold"]) for part in read_counted_scan(f).metadata["nodegroups"].values()}
                  for f in files]
    print(f"electrons per frame: {per_frame[0]:.2f}, {per_frame[1]:.2f}; background thresholds {thresholds}")
    assert abs(per_frame[0] - per_frame[1]) <= 0.03 * max(per_frame), per_frame
    assert len({int(t) for scan_thresholds in thresholds for t in scan_thresholds}) == 1, thresholds
    # One set of thresholds per scan, fitted on rank 0 from both NodeGroups' samples (threshold_exchange).
    assert all(len(scan_thresholds) == 1 for scan_thresholds in thresholds), thresholds
    for file in files:
        counted = read_counted_scan(file)
        assert len(counted.metadata["nodegroups"]) == 2
        # From both NodeGroups' samples: up to SAMPLE_FRAMES each, fewer when a pool fills with frames
        # still assembling at the scan's start and closes the sample early (80 and 2 frames seen here).
        assert 2 <= counted.statistics["number_of_samples"] <= 2 * SAMPLE_FRAMES, dict(counted.statistics)
    assert all(read_counted_scan(f).metadata["scan"]["background_thresholds_count_alike"] for f in files)

    # Files and directories follow the umask: another user reads a counted file of a real scan.
    for file in files:
        assert stat.S_IMODE(file.stat().st_mode) == 0o644, oct(file.stat().st_mode)
    assert stat.S_IMODE(output.stat().st_mode) == 0o755
    read = read_as_other_user(files[0])
    assert read.returncode == 0 and read.stdout == HDF5_SIGNATURE, read.stderr
