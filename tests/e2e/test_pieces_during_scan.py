"""A NodeGroup hands its counted frames to rank 0 while the scan runs, in pieces of ``[nodegroup]
gather_piece_events`` events, so that no rank holds its whole part of a large scan: on a running
stack (kvstore, aggregator, 4 producer daemons, 2 NodeGroup ranks under mpiexec) a paced scan with
small pieces makes the same file, dataset for dataset and attribute for attribute (but the clocks
and the NodeGroups' names), as the same scan with pieces larger than the scan, where every part
goes at the scan's end; each NodeGroup's status counts the pieces it handed over during the scan."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import stempy.io as stio
from support import sectorflow_command, stack_up, wait_until

from sectorflow.consumer.nodegroup import scan_file_name

pytestmark = pytest.mark.mpi

DETECTOR = {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}
SCAN_X, SCAN_Y = 24, 16
RATE_HZ = 64.0  # 384 frames: 6 s, the NodeGroups' loops take the frames counted many times over
START_S = 120.0
SMALL_PIECE = 300  # events: about 16 frames; a part of some 3,400 events goes in about 11 pieces
# What differs between two runs of one scan: the clocks, and the NodeGroups (uid: host and pid).
CLOCKS = {"first_message_s", "last_message_s", "finished_s", "written_s", "receive_s", "scan_s", "start_time",
          "end_time"}


def run_scan(make_config, tmp_path: Path, piece_events: int) -> tuple[Path, list[int]]:
    """Scan 1 on a fresh stack with ``gather_piece_events = piece_events``: its file, and the pieces
    each NodeGroup handed over during the scan (its status, pieces_during_scans_total)."""
    config, path = make_config(detector=DETECTOR, nodegroup={"gather_piece_events": piece_events},
                               simulator={"bright_field_radius_px": 20.0})
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output, START_S) as client:
        acquired = sectorflow_command("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape",
                                      f"{SCAN_X}x{SCAN_Y}", "--rate", str(RATE_HZ), "--wait", "--timeout", "120",
                                      timeout_s=300)
        assert acquired.returncode == 0, acquired.stdout + acquired.stderr
        file = output / scan_file_name(1)
        wait_until(file.exists, 60, "scan 1's file")

        def pieces() -> list[int] | None:
            statuses = [s for s in client.statuses("nodegroup").values() if s.scan == 1 and s.state == "finished"]
            return [int(s.extra["pieces_during_scans_total"]) for s in statuses] if len(statuses) == 2 else None

        wait_until(pieces, 30, "both NodeGroups' statuses after the scan")
        return file, pieces()


def flatten(path: Path) -> tuple[dict[str, object], dict[str, object]]:
    """Every dataset (its values) and every attribute of the file by path, less what differs between
    two runs of one scan (CLOCKS, the NodeGroups' own groups: their names hold a pid)."""
    datasets: dict[str, object] = {}
    attributes: dict[str, object] = {}
    with h5py.File(path, "r") as f:
        def visit(name: str, item: object) -> None:
            if "/nodegroups" in f"/{name}":
                return
            for key, value in item.attrs.items():
                if key not in CLOCKS:
                    attributes[f"{name}@{key}"] = value
            if isinstance(item, h5py.Dataset):
                value = item[()]
                if isinstance(value, np.ndarray) and value.dtype.kind == "O":  # stempy's frames: events per position
                    value = [np.asarray(v).tolist() for v in value.ravel()]
                datasets[name] = value

        f.visititems(visit)
    return datasets, attributes


def test_frames_go_to_rank_0_in_pieces_during_the_scan_and_the_file_is_the_same(make_config, tmp_path: Path) -> None:
    small, during = run_scan(make_config, tmp_path / "small", SMALL_PIECE)
    assert all(n > 0 for n in during), during  # both ranks' parts went in pieces while the scan ran
    print(f"pieces handed over during the scan, per NodeGroup: {during}")
    whole, during_whole = run_scan(make_config, tmp_path / "whole", 1 << 30)
    assert during_whole == [0, 0]  # pieces larger than the scan: each part at the scan's end, as before

    small_data, small_attrs = flatten(small)
    whole_data, whole_attrs = flatten(whole)
    assert sorted(small_data) == sorted(whole_data)
    for name, value in whole_data.items():
        if isinstance(value, list):
            assert small_data[name] == value, name
        else:
            np.testing.assert_array_equal(small_data[name], value, err_msg=name)
    assert sorted(small_attrs) == sorted(whole_attrs)
    for key, value in whole_attrs.items():
        np.testing.assert_array_equal(small_attrs[key], value, err_msg=key)
    # Whole, and stempy reads it.
    events = stio.load_electron_counts(str(small))
    assert tuple(int(n) for n in events.scan_shape) == (SCAN_Y, SCAN_X)
    assert sum(len(e) for e in events.data.ravel()) > 10 * SMALL_PIECE  # many pieces' worth of events
