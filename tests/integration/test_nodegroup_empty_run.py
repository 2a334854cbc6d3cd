"""A run that brings no data never rewrites a counted scan: after the NodeGroups
restarted, a run of a scan they counted before that sends its info messages and no sector (a replay
of an already-counted scan) leaves the scan's ``scans/<n>/file`` record byte for byte and its file
(SHA-256) as they were, and rank 0's log says why. It once recorded the good scan "failed, no file"."""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgpack
import pytest
from nodegroup_support import stack, start_job  # noqa: F401  (stack: fixture)
from support import wait_until

from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.protocol import ScanFileRecord, ServiceStatus, scan_file_key

pytestmark = pytest.mark.mpi

SMALL = {
    "detector": {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64},
    "nodegroup": {"scan_timeout_s": 1.0, "pool_frames": 64},
    "counting": {"background_threshold": 30.0, "xray_threshold": 1000.0},
}
SCAN, SCAN_X, SCAN_Y = 5, 4, 4
RECORD_S = 60.0
MARK = "acquire/mark"  # any key of the replica's subtree: its return orders the job's writes before it
KEPT = "nothing written: its files ({name}) and its record stay as they were"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_with_no_data_after_a_restart_leaves_the_counted_scans_record_and_file(stack, processes,
                                                                                      tmp_path) -> None:
    config, path, standin = stack(**SMALL)
    output = tmp_path / "out"
    job = start_job(processes, path, output, ranks=1)
    records = standin.wait_nodegroups(1, job, processes)
    standin.send_scan(records, scan=SCAN, scan_x=SCAN_X, scan_y=SCAN_Y)
    # The stand-in writes no producer record: the scan is never folded, its file record stays a key.
    raw = wait_until(lambda: standin.client.get(scan_file_key(SCAN)), RECORD_S, f"scan {SCAN}'s file record")
    counted = ScanFileRecord.decode(raw)
    assert (counted.outcome, counted.path) == ("complete", str(output / scan_file_name(SCAN)))
    digest = sha256(Path(counted.path))
    assert processes.stop(job) == 0
    wait_until(lambda: not standin.client.nodegroups(), 20, "the first job's NodeGroups to deregister")

    # A new job on the same directory; a run of the scan sends its info messages and no sector.
    again = start_job(processes, path, output, ranks=1)
    (record,) = standin.wait_nodegroups(1, again, processes)
    standin.send_scan([record], scan=SCAN, scan_x=SCAN_X, scan_y=SCAN_Y, frames=0, announce=False)

    kept = f"scan {SCAN}: no data message reached this job's NodeGroups ({record.uid}) in this run; " + \
        KEPT.format(name=scan_file_name(SCAN))
    wait_until(lambda: kept in processes.output(again), RECORD_S, "rank 0's line on the run")
    status: ServiceStatus = standin.client.statuses("nodegroup")[("nodegroup", record.uid)]
    assert "last_file" not in status.extra  # this job wrote no file
    assert processes.stop(again) == 0  # rank 0 has published all it ever will
    # A mark written after the job closed comes back after anything the job wrote.
    standin.client.set_once(MARK, msgpack.packb("mark"))
    wait_until(lambda: standin.client.get(MARK), RECORD_S, "the mark")
    assert standin.client.get(scan_file_key(SCAN)) == raw
    assert sha256(Path(counted.path)) == digest
    assert sorted(p.name for p in output.iterdir()) == [scan_file_name(SCAN)]
