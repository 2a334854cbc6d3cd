"""No scan lost silently, on the NodeGroups' side (real jobs under mpiexec, a real kvstore, real
HDF5): every part and every file leaves a record in the kvstore whose counts match the file; a
counted file is never replaced (a later part goes into a new file); a job that cannot write
registers nothing; a full disk keeps the scan pending, moves it to the second directory or fails
it honestly; a job whose rank died or hung leaves the kvstore as one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from nodegroup_support import AggregatorStandin, merged, stack, start_job  # noqa: F401  (stack: fixture)
from support import small_disk as tmpfs
from support import wait_until

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.protocol import NodeGroupScanRecord, ScanFileRecord, scan_file_key, scan_nodegroup_key

pytestmark = pytest.mark.mpi

SMALL = {
    "detector": {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64},
    "nodegroup": {"scan_timeout_s": 1.0, "pool_frames": 64, "liveness_ttl_s": 1.0},
    "counting": {"background_threshold": 30.0, "xray_threshold": 1000.0},
    "simulator": {"bright_field_radius_px": 20.0, "dose_per_frame": 10.0},
}
RECORD_S = 60.0




def file_record(standin: AggregatorStandin, scan: int, job: subprocess.Popen | None = None, processes=None,
                done=lambda record: True) -> ScanFileRecord:
    def written() -> ScanFileRecord | None:
        if job is not None and job.poll() is not None and standin.client.get(scan_file_key(scan)) is None:
            raise AssertionError(f"job exited {job.returncode}: {processes.output(job)}")
        raw = standin.client.get(scan_file_key(scan))
        record = ScanFileRecord.decode(raw) if raw is not None else None
        return record if record is not None and done(record) else None

    return wait_until(written, RECORD_S, f"scans/{scan:010d}/file")


def test_every_part_and_the_file_are_recorded_with_the_sectors_the_file_holds(stack, processes, tmp_path) -> None:
    config, path, standin = stack(**merged(SMALL, simulator={"dropped_fraction": 0.01}))
    output = tmp_path / "out"
    job = start_job(processes, path, output)
    records = standin.wait_nodegroups(2, job, processes)
    standin.send_scan(records, scan=4, scan_x=10, scan_y=10, info_first=True)
    dropped = {f: [s for s in range(4) if standin.simulator.dropped(4, f, s)] for f in range(100)}
    assert any(0 < len(s) < 4 for s in dropped.values()), "the seed should drop some sectors"
    whole_lost = [f for f, s in dropped.items() if len(s) == 4]

    record = file_record(standin, 4, job, processes)
    assert record.outcome == "incomplete" and record.path == str(output / scan_file_name(4))
    assert record.positions == 100 and record.positions_missing == len(whole_lost)
    assert record.frames_written == 100 - len(whole_lost) and record.extra_paths == []
    # Receiver r's sectors in the file: every frame written, less those that lacked sector r.
    assert record.sectors_counted == [100 - sum(1 for s in dropped.values() if r in s) for r in range(4)]
    assert "frames incomplete" in record.reason
    counted = read_counted_scan(record.path)
    assert counted.metadata["completeness"]["outcome"] == "incomplete"
    assert counted.metadata["scan"]["sectors_counted"].tolist() == record.sectors_counted

    parts = [NodeGroupScanRecord.decode(standin.client.get(scan_nodegroup_key(4, r.uid))) for r in records]
    assert sum(p.sectors_counted for p in parts) == sum(record.sectors_counted)
    assert sum(p.frames_complete + p.frames_incomplete for p in parts) == record.frames_written
    assert all(p.expected == p.received and not p.timed_out for p in parts)
    assert processes.stop(job) == 0


def test_a_part_for_a_scan_written_earlier_goes_into_a_new_file_never_over_it(stack, processes, tmp_path) -> None:
    config, path, standin = stack(**SMALL)
    output = tmp_path / "out"
    # Job 1 gets scan 6 routed over itself and a NodeGroup of another job that never sends:
    # its file holds half the positions.
    first = start_job(processes, path, output, ranks=1, name="first")
    (a,) = standin.wait_nodegroups(1, first, processes)
    ghost = SimpleNamespace(uid="zz-ghost")
    standin.send_scan([a, ghost], scan=6, scan_x=8, scan_y=4, only={a.uid})
    old = file_record(standin, 6, first, processes)
    assert (old.outcome, old.positions_missing, old.sectors_counted) == ("incomplete", 16, [16] * 4)
    base = Path(old.path)
    before = base.read_bytes()
    assert processes.stop(first) == 0
    wait_until(lambda: not standin.client.nodegroups(), 20, "job 1 to deregister")

    # Job 2, on the same directory, receives scan 6 whole: the scan was written (it reads the
    # directory at start-up), so the missing half is merged into a new file and the half the old
    # file holds already goes beside it; the old file is untouched.
    second = start_job(processes, path, output, ranks=1, name="second")
    (b,) = standin.wait_nodegroups(1, second, processes)
    standin.send_scan([b], scan=6, scan_x=8, scan_y=4)
    record = file_record(standin, 6, second, processes, done=lambda r: r.path != old.path)
    assert record.outcome == "complete" and record.sectors_counted == [32] * 4 and record.positions_missing == 0
    assert record.path == str(output / scan_file_name(6, 2))
    assert record.extra_paths == [str(base), str(output / scan_file_name(6, 3))]
    assert base.read_bytes() == before
    merged = read_counted_scan(record.path)
    assert len(merged.missing_positions) == 0 and merged.metadata["scan"]["merged_from"] == base.name
    assert "a part came after its file was written" in processes.output(second)
    assert sorted(p.name for p in output.iterdir()) == [scan_file_name(6, k) for k in (1, 2, 3)]


def test_a_job_that_cannot_write_its_files_registers_nothing(stack, tmp_path) -> None:
    config, path, standin = stack(**SMALL)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = subprocess.run([sys.executable, "-m", "sectorflow", "nodegroup", "--config", str(path), "--output",
                           str(blocker / "out")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"sectorflow nodegroup: error: output directory {blocker / 'out'}: cannot create it (Not a directory); "
        "no NodeGroup registered")
    assert standin.client.wait_synced(10.0)
    assert standin.client.nodegroups() == [] and not standin.client.statuses("nodegroup")


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs, with a way to fill it up and free it."""
    with tmpfs(tmp_path / "disk", "2m") as disk:
        yield disk


def test_a_full_disk_keeps_the_scan_pending_then_fails_it_leaving_nothing_partial(stack, processes, small_disk,
                                                                                  tmp_path) -> None:
    config, path, standin = stack(**merged(SMALL, nodegroup={"write_retry_s": 600.0}))
    output = small_disk.path / "out"
    job = start_job(processes, path, output)
    records = standin.wait_nodegroups(2, job, processes)
    small_disk.fill()
    standin.send_scan(records, scan=1, scan_x=8, scan_y=8)
    wait_until(lambda: "scan 1: cannot write" in processes.output(job), RECORD_S, "a failed write of scan 1")
    assert standin.client.get(scan_file_key(1)) is None  # pending, not failed
    small_disk.free()
    record = file_record(standin, 1, job, processes)
    assert record.outcome == "complete" and record.path == str(output / scan_file_name(1))

    small_disk.fill()
    standin.send_scan(records, scan=2, scan_x=8, scan_y=8)
    wait_until(lambda: "scan 2: cannot write" in processes.output(job), RECORD_S, "a failed write of scan 2")
    assert processes.stop(job) == 0  # the last try fails too
    record = file_record(standin, 2)
    assert record.outcome == "failed" and record.path == "" and "No space left on device" in record.reason
    assert sorted(p.name for p in output.iterdir()) == [scan_file_name(1)]  # nothing partial


def test_a_full_disk_sends_the_file_to_the_second_directory(stack, processes, small_disk, tmp_path) -> None:
    second = tmp_path / "second"
    config, path, standin = stack(**merged(SMALL, nodegroup={"second_output_dir": str(second)}))
    job = start_job(processes, path, small_disk.path / "out")
    records = standin.wait_nodegroups(2, job, processes)
    small_disk.fill()
    standin.send_scan(records, scan=3, scan_x=8, scan_y=8)
    record = file_record(standin, 3, job, processes)
    assert record.outcome == "complete" and record.path == str(second / scan_file_name(3))
    assert read_counted_scan(record.path).metadata["completeness"]["complete"]


def rank_pid(uid: str) -> int:
    """The process of a NodeGroup: its uid is <node>-<pid>-r<rank>-g<index>."""
    return int(uid.split("-")[-3])


def test_a_hung_rank_takes_its_job_out_of_the_kvstore_and_rank_0_writes_what_it_holds(stack, processes,
                                                                                      tmp_path) -> None:
    config, path, standin = stack(**merged(SMALL, nodegroup={"scan_timeout_s": 600.0}))
    output = tmp_path / "out"
    job = start_job(processes, path, output)
    records = standin.wait_nodegroups(2, job, processes)
    zero, one = sorted(records, key=lambda r: r.rank)
    # Rank 0's part is whole; rank 1's waits for the info it never gets, and rank 1 then hangs.
    standin.send_scan(records, scan=9, scan_x=8, scan_y=8, send_info={zero.uid})
    wait_until(lambda: standin.client.get(scan_nodegroup_key(9, zero.uid)) is not None, RECORD_S,
               "rank 0's part of scan 9")
    os.kill(rank_pid(one.uid), signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        wait_until(lambda: not standin.client.nodegroups(), RECORD_S, "every NodeGroup of the job to leave")
        left_s = time.monotonic() - stopped
        record = file_record(standin, 9)
        assert record.outcome == "incomplete" and f"NodeGroups {one.uid} never reported" in record.reason
        assert record.frames_written == 32 and record.sectors_counted == [32] * 4
        wait_until(lambda: job.poll() is not None, RECORD_S, "the job to exit")
    finally:
        os.kill(rank_pid(one.uid), signal.SIGCONT)
    assert job.returncode != 0
    assert "vanished from the kvstore without leaving" in processes.output(job)
    print(f"registrations gone {left_s:.2f} s after rank 1 hung (liveness_ttl_s 1.0)")


def test_a_rank_stopped_while_another_gives_no_goodbye_ends_the_job_instead_of_waiting_forever(
        stack, processes, tmp_path) -> None:
    """Seen in CI under scancel: rank 0 was stopped, rank 1 never passed on its goodbye; rank 0
    must not sit in MPI_Finalize, which waits for every rank, for ever."""
    config, path, standin = stack(**merged(SMALL, nodegroup={"liveness_ttl_s": 60.0}))
    job = start_job(processes, path, tmp_path / "out")
    records = standin.wait_nodegroups(2, job, processes)
    zero, one = sorted(records, key=lambda r: r.rank)
    # Registered before the ranks exchange their uids: rank 1 stopped sooner would hang rank 0 there.
    wait_until(lambda: "job of 2 ranks" in processes.output(job), RECORD_S, "rank 0 to learn every rank's uids")
    # Its registration outlives rank 0's wait for goodbyes (10 s): rank 0 sees no death.
    os.kill(rank_pid(one.uid), signal.SIGSTOP)
    try:
        os.kill(rank_pid(zero.uid), signal.SIGTERM)
        wait_until(lambda: job.poll() is not None, RECORD_S, "the job to exit")
    finally:
        if job.poll() is None:
            os.kill(rank_pid(one.uid), signal.SIGCONT)
        print(processes.output(job))  # shown by pytest when the test fails
    assert job.returncode != 0
    assert "stopping without the goodbye of 1 ranks: the job ends by MPI_Abort" in processes.output(job)


def test_a_killed_rank_leaves_no_registration_behind(stack, processes, tmp_path) -> None:
    config, path, standin = stack(**SMALL)
    job = start_job(processes, path, tmp_path / "out")
    records = standin.wait_nodegroups(2, job, processes)
    one = next(r for r in records if r.rank == 1)
    os.kill(rank_pid(one.uid), signal.SIGKILL)
    killed = time.monotonic()
    wait_until(lambda: not standin.client.nodegroups(), RECORD_S, "every NodeGroup of the job to leave")
    gone_s = time.monotonic() - killed
    wait_until(lambda: job.poll() is not None, RECORD_S, "the job to exit")
    assert job.returncode != 0
    print(f"registrations gone {gone_s:.2f} s after rank 1 was killed (liveness_ttl_s 1.0)")
