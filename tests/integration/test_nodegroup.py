"""Real NodeGroups under mpiexec, fed by an aggregator stand-in through a real kvstore: every frame
once in the scan's HDF5 file, events equal to stempy's, dropped sectors recorded, scans in a row,
a pool that does not grow, a dead upstream finished by timeout, a clean leave, one-line errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import stempy.image as stim
from nodegroup_support import AggregatorStandin, merged, stack, start_job  # noqa: F401  (stack: fixture)
from support import wait_until

from sectorflow.consumer.counting import count_frame, read_counted_scan
from sectorflow.protocol import ServiceStatus
from sectorflow.consumer.nodegroup import scan_file_name

pytestmark = pytest.mark.mpi

BACKGROUND, XRAY = 30.0, 1000.0
SMALL = {
    "detector": {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64},
    "nodegroup": {"scan_timeout_s": 1.0, "pool_frames": 64},
    "counting": {"background_threshold": BACKGROUND, "xray_threshold": XRAY},
    "simulator": {"bright_field_radius_px": 20.0, "dose_per_frame": 10.0},
}
FILE_S = 60.0




def wait_file(output: Path, scan: int, job: subprocess.Popen, processes) -> Path:
    path = output / scan_file_name(scan)

    def written() -> bool:
        if job.poll() is not None:
            raise AssertionError(f"job exited {job.returncode}: {processes.output(job)}")
        return path.exists()

    wait_until(written, FILE_S, f"{path.name}")
    return path


def stempy_events(frame: np.ndarray) -> np.ndarray:
    return stim.electron_count_frame(frame, darkreference=np.zeros(frame.shape, np.float32),
                                     background_threshold=BACKGROUND, xray_threshold=XRAY).data[0, 0]


def test_every_frame_once_with_stempy_events_then_sigterm_deregisters(stack, processes, tmp_path) -> None:
    config, path, standin = stack(**SMALL)
    output = tmp_path / "out"
    job = start_job(processes, path, output)
    records = standin.wait_nodegroups(2, job, processes)
    assert sorted({r.rank for r in records}) == [0, 1]
    assert all(len(r.ports) == config.n_receivers for r in records)
    standin.send_scan(records, scan=5, scan_x=8, scan_y=6)

    scan = read_counted_scan(wait_file(output, 5, job, processes))
    assert scan.scan_shape == (6, 8) and scan.frame_shape == (64, 64)
    assert len(scan.missing_positions) == 0 and len(scan.incomplete_positions) == 0
    for position in range(48):
        frame = standin.simulator.frame(5, position)
        np.testing.assert_array_equal(scan.events[position], stempy_events(frame), err_msg=f"position {position}")
    assert scan.metadata["scan"]["frames_complete"] == 48
    assert scan.metadata["scan"]["groups_reported"] == 2
    assert set(scan.metadata["nodegroups"]) == {r.uid for r in records}
    assert not scan.statistics["threshold_calculated"]
    assert scan.statistics["background_threshold"] == BACKGROUND

    assert processes.stop(job) == 0
    wait_until(lambda: not standin.client.nodegroups(), 20, "the NodeGroups to deregister")
    assert not standin.client.statuses("nodegroup")


def lossy_scan(stack, processes, tmp_path: Path, pool_frames: int):
    """A 25 x 20 scan (scan 2) that loses a sector every ~60 frames, through a NodeGroup job with
    ``pool_frames``: (the stand-in, the file read back, ``{frame: [sectors lost]}`` for frames that
    lost some but not all, ``[frames that lost all]``)."""
    config, path, standin = stack(**merged(SMALL, simulator={"dropped_fraction": 0.004},
                                           nodegroup={"pool_frames": pool_frames}))
    output = tmp_path / "out"
    job = start_job(processes, path, output)
    records = standin.wait_nodegroups(2, job, processes)
    standin.send_scan(records, scan=2, scan_x=25, scan_y=20, info_first=True)
    dropped = {f: [s for s in range(4) if standin.simulator.dropped(2, f, s)] for f in range(500)}
    incomplete = {f: s for f, s in dropped.items() if 0 < len(s) < 4}
    assert incomplete, "the seed should drop some sectors"
    missing = [f for f, s in dropped.items() if len(s) == 4]
    return standin, read_counted_scan(wait_file(output, 2, job, processes)), incomplete, missing


def test_dropped_sectors_give_incomplete_and_missing_counts(stack, processes, tmp_path) -> None:
    # A pool holding the whole scan: nothing is counted before the scan ends.
    standin, scan, incomplete, missing = lossy_scan(stack, processes, tmp_path, pool_frames=600)
    assert scan.incomplete_positions.tolist() == sorted(incomplete)
    assert [s.tolist() for s in scan.incomplete_missing_sectors] == [incomplete[f] for f in sorted(incomplete)]
    assert scan.missing_positions.tolist() == missing
    completeness = scan.metadata["completeness"]
    assert completeness["incomplete_frames"] == len(incomplete) and not completeness["complete"]
    assert scan.metadata["scan"]["frames_complete"] == 500 - len(incomplete) - len(missing)
    meta = scan.metadata["scan"]
    assert not meta["timed_out"] and (meta["late_messages"], meta["evicted_frames"]) == (0, 0)
    # An incomplete frame is counted with zeros in place of its missing sectors.
    f = sorted(incomplete)[0]
    frame = standin.simulator.frame(2, f)
    for sector in incomplete[f]:
        frame[sector * 16:(sector + 1) * 16] = 0
    np.testing.assert_array_equal(scan.events[f], stempy_events(frame))


def test_a_pool_filled_by_lost_sectors_counts_exactly_those_frames_early(stack, processes, tmp_path) -> None:
    # 8 frames of pool (4 per counting thread, and all of a NodeGroup's frames go to one of them) and
    # a sector lost every ~60 frames: frames waiting for lost sectors fill the pool and are counted
    # early (evicted) once the producer thread that lost the sector has sent a later frame; no other
    # frame is cut short and no sector comes too late.
    standin, scan, incomplete, missing = lossy_scan(stack, processes, tmp_path, pool_frames=8)
    meta = scan.metadata["scan"]
    assert scan.missing_positions.tolist() == missing and not meta["timed_out"]
    assert scan.incomplete_positions.tolist() == sorted(incomplete)
    assert [s.tolist() for s in scan.incomplete_missing_sectors] == [incomplete[f] for f in sorted(incomplete)]
    assert 0 < meta["evicted_frames"] <= len(incomplete) and meta["late_messages"] == 0
    assert meta["frames_complete"] == 500 - len(incomplete) - len(missing)
    complete = [f for f in range(500) if f not in incomplete and f not in missing]
    for f in complete[:: len(complete) // 5]:
        np.testing.assert_array_equal(scan.events[f], stempy_events(standin.simulator.frame(2, f)), err_msg=f"frame {f}")


def test_a_pool_too_small_for_the_spread_records_every_frame_it_cuts_short(stack, processes, tmp_path) -> None:
    # 4 frames of pool (2 per counting thread): a receiver running ahead past a lost sector takes the
    # slots the others need, so a frame still receiving may be counted early. Nothing is lost
    # silently: such frames are incomplete and evicted, their sectors that come after are late.
    standin, scan, incomplete, missing = lossy_scan(stack, processes, tmp_path, pool_frames=4)
    meta = scan.metadata["scan"]
    assert scan.missing_positions.tolist() == missing and not meta["timed_out"]
    counted_incomplete = dict(zip(scan.incomplete_positions.tolist(),
                                  (s.tolist() for s in scan.incomplete_missing_sectors)))
    for f, lost in incomplete.items():
        assert set(lost) <= set(counted_incomplete[f]), f"frame {f}"
    cut_short = len(counted_incomplete) - len(incomplete)
    assert meta["evicted_frames"] > 0 and 0 <= cut_short <= meta["evicted_frames"]
    assert meta["frames_complete"] + meta["frames_incomplete"] == 500 - len(missing)
    sent = sum(4 - len(s) for s in incomplete.values()) + 4 * (500 - len(incomplete) - len(missing))
    placed = 4 * meta["frames_complete"] + sum(4 - len(s) for s in counted_incomplete.values())
    assert placed + meta["late_messages"] == sent


def test_a_small_pool_holds_out_of_order_sectors_back_instead_of_counting_early(stack, processes, tmp_path) -> None:
    # 16 frames of pool for 256-frame scans whose sectors come from 4 producer threads per receiver,
    # up to 9 frames apart: backpressure alone must bring every frame in whole.
    config, path, standin = stack(**merged(SMALL, nodegroup={"pool_frames": 16, "scan_timeout_s": 30.0}),
                                  receivers=[{"host": "127.0.0.1", "threads": 4}] * 4)
    output = tmp_path / "out"
    job = start_job(processes, path, output)
    records = standin.wait_nodegroups(2, job, processes)
    for scan_number in (1, 2):
        standin.send_scan(records, scan=scan_number, scan_x=16, scan_y=16, producer_threads=4, lag_frames=3)
    for scan_number in (1, 2):
        scan = read_counted_scan(wait_file(output, scan_number, job, processes))
        meta = scan.metadata["scan"]
        assert (meta["frames_complete"], meta["frames_incomplete"], meta["evicted_frames"]) == (256, 0, 0)
        assert scan.metadata["completeness"]["complete"] and not meta["timed_out"]
        for position in (0, 1, 130, 255):
            frame = standin.simulator.frame(scan_number, position)
            np.testing.assert_array_equal(scan.events[position], stempy_events(frame), err_msg=f"position {position}")


def test_three_scans_three_files_pool_flat_and_partial_routing(stack, processes, tmp_path) -> None:
    config, path, standin = stack(**SMALL)
    output = tmp_path / "out"
    job = start_job(processes, path, output, groups=2)
    records = standin.wait_nodegroups(4, job, processes)

    def status(uid: str) -> ServiceStatus:
        return standin.client.statuses("nodegroup")[("nodegroup", uid)]

    standin.send_scan(records, scan=1, scan_x=8, scan_y=8)
    wait_file(output, 1, job, processes)
    wait_until(lambda: all(status(r.uid).scan == 1 and status(r.uid).state == "finished" for r in records), 20,
               "every NodeGroup done with scan 1")
    assert all(status(r.uid).extra["pool_bytes"] == 0 for r in records), "a finished scan holds no sector"

    # Scan 2 goes to the NodeGroups of rank 1 only: rank 0 must not wait for its own.
    rank1 = [r for r in records if r.rank == 1]
    standin.send_scan(rank1, scan=2, scan_x=4, scan_y=4)
    scan2 = read_counted_scan(wait_file(output, 2, job, processes))
    assert len(scan2.missing_positions) == 0
    assert set(scan2.metadata["nodegroups"]) == {r.uid for r in rank1}

    standin.send_scan(records, scan=3, scan_x=16, scan_y=16)  # four times scan 1
    scan3 = read_counted_scan(wait_file(output, 3, job, processes))
    assert scan3.metadata["scan"]["frames_complete"] == 256
    wait_until(lambda: all(status(r.uid).scan == 3 and status(r.uid).state == "finished" for r in records), 20,
               "every NodeGroup done with scan 3")
    # Memory follows the sectors in flight, bounded by pool_frames whatever the scan's size.
    bound = SMALL["nodegroup"]["pool_frames"] * 64 * 64 * 2
    for r in records:
        extra = status(r.uid).extra
        assert (extra["pool_bytes"], extra["pool_slots_in_use"]) == (0, 0)
        assert 0 < extra["pool_bytes_high_water"] <= bound
    assert sorted(p.name for p in output.iterdir()) == [scan_file_name(n) for n in (1, 2, 3)]


def test_dead_upstream_and_killed_job_leave_the_other_job_finishing_by_timeout(stack, processes, tmp_path) -> None:
    config, path, standin = stack(**SMALL)
    job_a = start_job(processes, path, tmp_path / "a", ranks=1, name="job-a")
    (a,) = standin.wait_nodegroups(1, job_a, processes)
    job_b = start_job(processes, path, tmp_path / "b", ranks=1, name="job-b", extra=("--job", "job-b"))
    records = standin.wait_nodegroups(2, job_b, processes)
    b = next(r for r in records if r.uid != a.uid)
    # Half the scan, then job B is killed and the upstream stops (its info never comes).
    standin.send_scan(records, scan=7, scan_x=8, scan_y=8, frames=32, send_info=False)
    os.killpg(job_b.pid, signal.SIGKILL)
    job_b.wait(20)
    scan = read_counted_scan(wait_file(tmp_path / "a", 7, job_a, processes))
    meta = scan.metadata["scan"]
    assert meta["timed_out"]
    routed_to_a = [f for f in range(32) if sorted([a.uid, b.uid]).index(a.uid) == f % 2]
    assert meta["frames_complete"] == len(routed_to_a)
    assert len(scan.missing_positions) == 64 - len(routed_to_a)
    assert scan.metadata["nodegroups"][a.uid]["expected"].tolist() == [-1] * 4

    # Still serving: the next scan, routed to A alone, is whole.
    standin.send_scan([a], scan=8, scan_x=4, scan_y=4)
    scan8 = read_counted_scan(wait_file(tmp_path / "a", 8, job_a, processes))
    assert scan8.metadata["completeness"]["complete"]
    assert not scan8.metadata["scan"]["timed_out"]


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (its socket inodes matched in /proc/net/tcp*)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_mpiexec_listens_only_in_its_configured_port_range(stack, processes, tmp_path) -> None:
    # A ZeroMQ peer reconnecting to a NodeGroup that is gone (its data port was ephemeral) ended a job
    # whose mpiexec had taken that port: hydra read the ZMTP greeting as "proxy with ID 255" and exited
    # 255. Its control port now comes from [nodegroup] mpiexec_port_min..max, out of the ephemeral range.
    config, path, standin = stack(**merged(SMALL, nodegroup={"mpiexec_port_min": 23100, "mpiexec_port_max": 23199}))
    job = start_job(processes, path, tmp_path / "out", ranks=1)
    (record,) = standin.wait_nodegroups(1, job, processes)
    ports = listening_ports(job.pid)
    assert ports and all(23100 <= port <= 23199 for port in ports), ports
    assert not ports & set(record.ports)


def test_real_geometry_with_thresholds_from_the_scan(stack, processes, tmp_path) -> None:
    config, path, standin = stack(
        nodegroup={"scan_timeout_s": 5.0, "pool_frames": 16},
        counting={"threshold_sample_frames": 4},
        simulator={"dose_per_frame": 20.0},
    )
    output = tmp_path / "out"
    job = start_job(processes, path, output)
    records = standin.wait_nodegroups(2, job, processes)
    standin.send_scan(records, scan=1, scan_x=4, scan_y=4)
    scan = read_counted_scan(wait_file(output, 1, job, processes))
    assert scan.frame_shape == (576, 576) and len(scan.missing_positions) == 0
    assert scan.statistics["threshold_calculated"]
    routing = sorted(r.uid for r in records)
    for position in range(16):
        group = scan.metadata["nodegroups"][routing[position % 2]]
        expected = count_frame(standin.simulator.frame(1, position), background_threshold=group["background_threshold"],
                               x_ray_threshold=group["x_ray_threshold"])
        np.testing.assert_array_equal(scan.events[position], expected, err_msg=f"position {position}")


def test_unbindable_host_is_one_line_error(make_config, tmp_path) -> None:
    # Not an address of this machine (and not loopback: the test says it knows, allow_insecure).
    _, path = make_config(nodegroup={"host": "192.0.2.1"}, security={"allow_insecure": True})
    done = subprocess.run([sys.executable, "-m", "sectorflow", "nodegroup", "--config", str(path), "--output",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(
        "sectorflow nodegroup: error: NodeGroup ") and "cannot bind data socket 0 on tcp://192.0.2.1:*" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_option_is_one_line_error(make_config, tmp_path) -> None:
    _, path = make_config()
    done = subprocess.run([sys.executable, "-m", "sectorflow", "nodegroup", "--config", str(path),
                           "--groups-per-rank", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2  # a usage error, as argparse's own
    assert done.stderr.strip() == "sectorflow nodegroup: error: --groups-per-rank 0: need at least 1 NodeGroup per rank"
