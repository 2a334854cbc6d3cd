"""The README's main command and the supervised stack, from a file in configs/ to an HDF5 file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import stempy.image as stim
from support import wait_until

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration import load_running
from sectorflow.simulator import simulator_from_config

pytestmark = pytest.mark.mpi


def sectorflow(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def test_demo_runs_the_whole_pipeline_and_summarises_it(make_config, tmp_path: Path) -> None:
    config, path = make_config(simulator={"specimen": "crystal"})  # as the shipped configuration
    output = tmp_path / "counted"
    result = sectorflow("demo", "--config", str(path), "--scan-shape", "12x8", "--output", str(output),
                        "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"watch it run: http://127.0.0.1:{config.dashboard.port}/" in result.stderr  # where to look meanwhile
    lines = result.stdout.splitlines()
    assert lines[0] == "scan 1: 12 x 8 probe positions, 96 frames, 0.06 GB raw"
    assert "frames complete: 96, incomplete: 0, missing: 0" in result.stdout
    h5 = output / scan_file_name(1)
    counted = read_counted_scan(h5)
    assert counted.scan_shape == (8, 12) and all(e is not None for e in counted.events)
    mean = float(np.mean([len(e) for e in counted.events]))
    assert f"electrons per frame: {mean:.1f} (mean)" in result.stdout
    # The specimen's virtual images, printed and in the file.
    assert "virtual bright field" in result.stdout and "virtual dark field" in result.stdout
    assert "centre of mass x: from" in result.stdout
    assert counted.images["bright_field"].shape == (8, 12) and np.isfinite(counted.images["com_x"]).all()
    png = h5.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The finished scan's file, shown as the live view shows a running scan, and saved as a picture.
    viewed = sectorflow("view", str(h5), "--png", str(tmp_path / "view.png"), "--config", str(path))
    assert viewed.returncode == 0, viewed.stderr
    assert viewed.stdout.startswith("scan 1: 96 of 96 positions counted (complete)\n")
    assert "bright field" in viewed.stdout and f"picture: {tmp_path / 'view.png'}" in viewed.stdout
    assert (tmp_path / "view.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Everything the demo started has stopped.
    assert not [s for s in load_running(tmp_path / "run") if Path(f"/proc/{s.pid}").exists()]


def test_up_acquire_down(make_config, tmp_path: Path) -> None:
    config, path = make_config()
    run_dir = tmp_path / "run"
    up = sectorflow("up", "--config", str(path), "--run-dir", str(run_dir), "--output", str(tmp_path / "h5"))
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert f"dashboard: http://127.0.0.1:{config.dashboard.port}/" in up.stdout
        services = load_running(run_dir)
        assert [s.name for s in services] == ["kvstore", "aggregator", "nodegroups", "producer-0", "producer-1",
                                              "producer-2", "producer-3", "dashboard"]
        assert all((run_dir / f"{s.name}.log").exists() for s in services)
        # A second stack on the same ports starts nothing and names what holds them.
        second = sectorflow("up", "--config", str(path), "--run-dir", str(tmp_path / "second"))
        assert second.returncode == 1
        kvstore = next(s for s in services if s.name == "kvstore")
        assert second.stderr.strip().splitlines() == [
            f"sectorflow up: error: not starting: port {config.kvstore.port} (kvstore, [kvstore] port) on 127.0.0.1 "
            f"is held by pid {kvstore.pid} ({' '.join(kvstore.argv)}) (and {3 + config.n_receivers} more ports): "
            "another stack runs on these ports; stop it ('sectorflow down --run-dir DIR' of that stack) or give this "
            "one other ports in its configuration"]
        assert not load_running(tmp_path / "second")
        # A producer killed, `up --only` starts it again in its place; the others run on, recorded as before.
        killed = next(s for s in services if s.name == "producer-1")
        os.kill(killed.pid, signal.SIGKILL)
        again = sectorflow("up", "--config", str(path), "--run-dir", str(run_dir), "--only", "producer-1")
        assert again.returncode == 0, again.stderr[-3000:]
        restarted = load_running(run_dir)
        assert [s.name for s in restarted] == [s.name for s in services if s.name != "producer-1"] + ["producer-1"]
        assert [s.pid for s in restarted][:-1] == [s.pid for s in services if s.name != "producer-1"]
        assert restarted[-1].pid != killed.pid and Path(f"/proc/{restarted[-1].pid}").exists()
        unknown = sectorflow("up", "--config", str(path), "--run-dir", str(run_dir), "--only", "producer-9")
        assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1, unknown.stderr
        assert "--only producer-9: no such service" in unknown.stderr
        services = restarted
        # The first stack's scans are whole (acquire --wait exits 0 only then).
        for scan in (1, 2):
            acquired = sectorflow("acquire", "--config", str(path), "--scan-number", str(scan), "--scan-shape",
                                  "4x4", "--wait", "--timeout", "120")
            assert acquired.returncode == 0, acquired.stderr
            wait_until(lambda: (tmp_path / "h5" / scan_file_name(scan)).exists(), 60, f"scan {scan}'s file")
    finally:
        down = sectorflow("down", "--config", str(path), "--run-dir", str(run_dir))
    assert down.returncode == 0, down.stderr
    assert down.stdout.startswith("stopped 8 services")
    for service in services:
        assert not Path(f"/proc/{service.pid}").exists() or _zombie(service.pid)


SMALL_DETECTOR = {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}
BACKGROUND, XRAY = 30.0, 1000.0


def test_real_producers_and_aggregator_to_nodegroups_equal_stempy_with_lost_sectors_recorded(
        make_config, tmp_path: Path) -> None:
    # The whole stack (kvstore, aggregator, 4 producer daemons, 2 NodeGroup ranks under mpiexec),
    # scans in a row, producers losing 0.1% of sectors upstream; rank 1 sends its parts to rank 0 in
    # pieces of a few frames, which rank 0 writes into the file as they come.
    config, path = make_config(
        detector=SMALL_DETECTOR, simulator={"dropped_fraction": 0.001, "bright_field_radius_px": 20.0},
        counting={"background_threshold": BACKGROUND, "xray_threshold": XRAY},
        nodegroup={"pool_frames": 64, "gather_piece_events": 200})
    run_dir, output = tmp_path / "run", tmp_path / "h5"
    up = sectorflow("up", "--config", str(path), "--run-dir", str(run_dir), "--output", str(output))
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        shapes = {1: (40, 25), 2: (8, 8), 3: (16, 16)}
        simulator = simulator_from_config(config)
        for scan, (scan_x, scan_y) in shapes.items():
            acquired = sectorflow("acquire", "--config", str(path), "--scan-number", str(scan), "--scan-shape",
                                  f"{scan_x}x{scan_y}", "--wait", "--timeout", "120")
            # Sectors lost upstream are missing: the outcome says so, and how many.
            dropped = sum(simulator.dropped(scan, f, s) for f in range(scan_x * scan_y) for s in range(4))
            sectors = scan_x * scan_y * 4
            outcome = "incomplete" if dropped else "complete"
            assert acquired.returncode == (1 if dropped else 0), acquired.stdout + acquired.stderr
            assert (f"scan {scan}: {outcome}: {sectors - dropped} counted + 0 spilled + {dropped} missing = "
                    f"{sectors} sectors") in acquired.stdout, acquired.stdout
            assert ("never reached the producer" in acquired.stdout) == bool(dropped), acquired.stdout
            # The breakdown of an incomplete scan, receiver by receiver (sector s is receiver s's).
            for receiver in range(4) if dropped else ():
                lost = sum(simulator.dropped(scan, f, receiver) for f in range(scan_x * scan_y))
                assert (f"receiver {receiver}: {scan_x * scan_y - lost} counted, 0 spilled, {lost} missing"
                        + (f" ({lost} never reached the producer)" if lost else "")) in acquired.stdout, acquired.stdout
        files = [output / scan_file_name(scan) for scan in shapes]
        wait_until(lambda: all(f.exists() for f in files), 60, "the three scans' files")
    finally:
        down = sectorflow("down", "--config", str(path), "--run-dir", str(run_dir))
    assert down.returncode == 0, down.stderr

    seen_incomplete = 0
    for scan, (scan_x, scan_y) in shapes.items():
        counted = read_counted_scan(output / scan_file_name(scan))
        frames = scan_x * scan_y
        lost = {f: [s for s in range(4) if simulator.dropped(scan, f, s)] for f in range(frames)}
        incomplete = sorted(f for f, s in lost.items() if 0 < len(s) < 4)
        missing = sorted(f for f, s in lost.items() if len(s) == 4)
        assert counted.scan_shape == (scan_y, scan_x)
        assert counted.incomplete_positions.tolist() == incomplete, f"scan {scan}"
        seen_incomplete += len(incomplete)
        assert counted.missing_positions.tolist() == missing, f"scan {scan}"
        meta = counted.metadata["scan"]
        assert meta["frames_complete"] == frames - len(incomplete) - len(missing) and not meta["timed_out"]
        assert len(counted.metadata["nodegroups"]) == 2
        for f in range(frames):
            if f in missing:
                continue
            frame = simulator.frame(scan, f)
            for sector in lost[f]:
                frame[sector * 16:(sector + 1) * 16] = 0
            expected = stim.electron_count_frame(frame, darkreference=np.zeros(frame.shape, np.float32),
                                                 background_threshold=BACKGROUND, xray_threshold=XRAY).data[0, 0]
            np.testing.assert_array_equal(counted.events[f], expected, err_msg=f"scan {scan} frame {f}")
    assert seen_incomplete, "the seed should lose some sectors"


def test_unpaced_producer_threads_stay_in_step_so_every_frame_arrives_whole(make_config, tmp_path: Path) -> None:
    # Four simulator threads per receiver at the real geometry, as fast as they go, through a pool
    # of 160 frames: the producers' sibling gate keeps each receiver's threads within
    # max_lead_frames (plus what their queues hold), so the NodeGroup never counts a frame early.
    # Without the gate (max_lead_frames = 1000000) this cut a third to a half of the frames short.
    config, path = make_config(receivers=[{"host": "127.0.0.1", "threads": 4}] * 4,
                               producer={"max_lead_frames": 16}, nodegroup={"pool_frames": 160})
    run_dir, output = tmp_path / "run", tmp_path / "h5"
    up = sectorflow("up", "--config", str(path), "--run-dir", str(run_dir), "--output", str(output))
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        acquired = sectorflow("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", "48x32",
                              "--wait", "--timeout", "120")
        assert acquired.returncode == 0, acquired.stderr
        wait_until(lambda: (output / scan_file_name(1)).exists(), 60, "the scan's file")
    finally:
        down = sectorflow("down", "--config", str(path), "--run-dir", str(run_dir))
    assert down.returncode == 0, down.stderr
    counted = read_counted_scan(output / scan_file_name(1))
    meta = counted.metadata["scan"]
    assert (meta["frames_complete"], meta["frames_incomplete"]) == (48 * 32, 0)
    assert (meta["evicted_frames"], meta["late_messages"]) == (0, 0)
    assert counted.missing_positions.size == 0 and counted.incomplete_positions.size == 0


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
