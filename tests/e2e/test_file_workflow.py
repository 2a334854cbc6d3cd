"""The file workflow against ours on the same scan: a scan written to raw files as
fallback by 2 producer threads per receiver (`sectorflow up --no-nodegroups`), then replayed into a
NodeGroup job (`acquire --replay`). stempy 3.6.0's own `electron_count` on the raw files (multi-pass
reader, its own thresholds) and our HDF5 file, read by stempy, hold the same events frame by frame.

stempy's electron_count takes its thresholds from ONE frame (threshold_num_blocks=1: the first
complete frame its reader threads hand over, number_of_samples copies of it), ours from each
NodeGroup's first threshold_sample_frames complete frames. Pixel values are integers, so two
background thresholds count alike exactly when their floors are equal: the shipped configuration's
dark noise (2.1 ADU) puts every early frame's background threshold well inside (29, 30). At 2.2 ADU
it lay within a few hundredths of 30, and which side stempy landed on depended on which frame its
threads reached first (README, "Counting a scan on disk with stempy").
"""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import pytest
import stempy.image
import stempy.io
from support import sectorflow_command, stack_up, wait_until

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration.stack import stack_services
from sectorflow.protocol import find_raw_files

pytestmark = pytest.mark.mpi

SCAN_X, SCAN_Y = 16, 16
START_S, SCAN_S = 60.0, 300.0
# The file workflow's command line: 100 samples, 4.5 and 175 sigma.
SAMPLES, BACKGROUND_SIGMA, XRAY_SIGMA = 100, 4.5, 175.0


def test_a_replayed_fallback_scan_counts_as_stempys_electron_count_on_its_raw_files(
        make_config, processes, tmp_path: Path) -> None:
    # The shipped configuration (its background threshold near 29.5: see the module's docstring),
    # 2 producer threads per receiver.
    config, path = make_config(receivers=[{"host": "127.0.0.1", "threads": 2}] * 4,
                               counting={"background_sigma": BACKGROUND_SIGMA, "xray_sigma": XRAY_SIGMA})
    output = tmp_path / "h5"
    shape = f"{SCAN_X}x{SCAN_Y}"
    sectors = SCAN_X * SCAN_Y * config.n_receivers
    with stack_up(config, path, tmp_path / "run", output, START_S, nodegroups=False) as client:
        on_disk = sectorflow_command("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", shape,
                                     "--scan-step-nm", "3.5", "--wait", "--timeout", str(SCAN_S))
        assert on_disk.returncode == 0, on_disk.stdout + on_disk.stderr
        assert f"scan 1: on disk, not counted: {sectors} on disk + 0 missing" in on_disk.stdout, on_disk.stdout
        spec = next(s for s in stack_services(config, 2, output) if s.name == "nodegroups")
        processes.start(*spec.argv, name="nodegroups", env=dict(spec.env))
        wait_until(lambda: len(client.nodegroups()) == 2, START_S, "two NodeGroups to register")
        replayed = sectorflow_command("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", shape,
                                      "--replay", "--wait", "--timeout", str(SCAN_S))
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        assert f"scan 1: complete: {sectors} counted + 0 spilled + 0 missing" in replayed.stdout, replayed.stdout

    files = find_raw_files(config.producer.fallback_dir, 1)
    assert [Path(f).name for f in files] == [f"data_scan{1:010d}_module{s}_{t}.data" for s in range(4) for t in range(2)]
    reader = stempy.io.reader(files, stempy.io.FileVersion.VERSION5, backend="multi-pass")
    theirs = stempy.image.electron_count(
        reader, darkreference=np.zeros((576, 576)), number_of_samples=SAMPLES,
        background_threshold_n_sigma=BACKGROUND_SIGMA, xray_threshold_n_sigma=XRAY_SIGMA)
    h5 = output / scan_file_name(1)
    ours = stempy.io.load_electron_counts(str(h5))
    assert tuple(ours.scan_shape) == tuple(theirs.scan_shape) == (SCAN_Y, SCAN_X)
    assert ours.data.shape == theirs.data.shape == (SCAN_X * SCAN_Y, 1)
    # Why they agree: every threshold counts the integer pixel values alike.
    stempy_statistics = theirs.metadata["electron_counting"]
    groups = read_counted_scan(h5).metadata["nodegroups"]
    assert len(groups) == 2
    brightest = max(int(np.asarray(block.data).max()) for position in range(SCAN_X * SCAN_Y)
                    for block in reader.read_frames(position))
    for uid, group in groups.items():
        assert math.floor(group["background_threshold"]) == math.floor(stempy_statistics["background_threshold"]), uid
        xrays = (group["x_ray_threshold"], stempy_statistics["x_ray_threshold"])
        assert math.ceil(xrays[0]) == math.ceil(xrays[1]) or brightest < min(xrays), uid
    differing = [p for p in range(SCAN_X * SCAN_Y) if not np.array_equal(ours.data[p][0], theirs.data[p][0])]
    assert not differing, f"{len(differing)} positions differ, first {differing[:5]}"
    assert sum(len(f[0]) for f in ours.data) == sum(len(f[0]) for f in theirs.data) > 0
    # The replay kept the first run's own settings (the scan was over and folded when it was replayed).
    with h5py.File(h5, "r") as f:
        assert dict(f["metadata/instrument/scan_step"].attrs) == {"value": 3.5, "units": "nm", "source": "acquire"}

