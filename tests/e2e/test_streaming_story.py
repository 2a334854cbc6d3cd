"""The whole story on a real Slurm cluster: a scan with no session lands on disk; a session's
NodeGroups register and the next scan streams into an HDF5 file equal to stempy's counting;
cancelling the session makes scans fall back to disk again; the disk scan is then replayed through
a new session and reduced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import assert_counted_as_stempy, wait_until

from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.protocol import find_raw_files

pytestmark = [pytest.mark.slurm, pytest.mark.mpi]

SCAN_X, SCAN_Y = 6, 4
BACKGROUND, XRAY = 30.0, 1000.0


def sectorflow(env: dict[str, str], *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True, env=env,
                            timeout=timeout_s)
    assert result.returncode == 0, f"sectorflow {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def counted_file(output: Path, scan: int) -> Path | None:
    path = output / scan_file_name(scan)
    return path if path.exists() else None


def test_disk_then_stream_then_disk_then_replay(slurm, slurm_env, make_config, processes, tmp_path: Path) -> None:
    config, path = make_config(
        receivers=[{"host": "127.0.0.1", "threads": 2}] * 4,
        counting={"background_threshold": BACKGROUND, "xray_threshold": XRAY},
        nodegroup={"scan_timeout_s": 30.0},
        slurm={"nodes": 1, "tasks_per_node": 2, "launcher": "mpiexec", "time": "00:10:00"},
    )
    output = Path(config.nodegroup.output_dir)
    raw = Path(config.producer.fallback_dir)
    env = {**slurm_env}
    for service in ("kvstore", "aggregator"):
        processes.sectorflow(service, "--config", str(path), name=service, env=env)
    for receiver in range(config.n_receivers):
        processes.sectorflow("producer", "--config", str(path), "--receiver", str(receiver),
                             name=f"producer-{receiver}", env=env)
    shape = f"{SCAN_X}x{SCAN_Y}"
    with Client.from_config(config, name="e2e") as client:
        wait_until(lambda: len(client.statuses("producer")) == 8 and len(client.statuses("aggregator")) == 4,
                   60, "producers and aggregator threads to announce themselves")

        # 1. No session: the scan lands on disk as raw files.
        sectorflow(env, "acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", shape, "--wait")
        assert len(find_raw_files(str(raw), 1)) == 8
        assert counted_file(output, 1) is None

        # 2. A session starts; its NodeGroups register; the next scan streams into an HDF5 file.
        job = sectorflow(env, "session", "submit", "--config", str(path), "--log-dir", str(tmp_path / "sessions"))
        job_id = job.stdout.split()[3]
        wait_until(lambda: len(client.nodegroups()) == 2, 90, f"session {job_id}'s NodeGroups to register")
        sectorflow(env, "acquire", "--config", str(path), "--scan-number", "2", "--scan-shape", shape, "--wait")
        h5 = wait_until(lambda: counted_file(output, 2), 90, "the HDF5 file of scan 2")
        assert_counted_as_stempy(config, h5, 2, (SCAN_X, SCAN_Y), BACKGROUND, XRAY)
        assert find_raw_files(str(raw), 2) == []

        # 3. Cancel: the NodeGroups vanish and the next scan falls back to disk.
        sectorflow(env, "session", "cancel", "--config", str(path), job_id)
        wait_until(lambda: client.nodegroups() == [], 60, "the cancelled session's NodeGroups to vanish")
        sectorflow(env, "acquire", "--config", str(path), "--scan-number", "3", "--scan-shape", shape, "--wait")
        assert len(find_raw_files(str(raw), 3)) == 8

        # 4. Replay the disk scan 1 through a new session: it is reduced like a streamed one.
        job = sectorflow(env, "session", "submit", "--config", str(path), "--log-dir", str(tmp_path / "sessions"))
        wait_until(lambda: len(client.nodegroups()) == 2, 90, "the new session's NodeGroups to register")
        sectorflow(env, "acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", shape, "--replay",
                   "--wait")
        h5 = wait_until(lambda: counted_file(output, 1), 90, "the HDF5 file of the replayed scan 1")
        assert_counted_as_stempy(config, h5, 1, (SCAN_X, SCAN_Y), BACKGROUND, XRAY)
        sectorflow(env, "session", "cancel", "--config", str(path), job.stdout.split()[3])
