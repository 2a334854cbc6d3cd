"""One stack, one owner: on a running stack (`sectorflow up`: kvstore, aggregator, 4 producer
daemons, a NodeGroup job of 2 ranks), a second producer daemon for a receiver the stack serves and a
second NodeGroup job of the same name are refused at start with one line naming the host and pid
of the one that runs, register nothing, and the stack's next scan is whole."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support import sectorflow_command, stack_up

from sectorflow.consumer.nodegroup.launch import mpiexec_environment
from sectorflow.orchestration.supervisor import load_running

pytestmark = pytest.mark.mpi

DETECTOR = {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}
START_S = 120.0


def test_a_second_producer_daemon_or_nodegroup_job_is_refused_and_the_first_serves_on(make_config,
                                                                                       tmp_path: Path) -> None:
    config, path = make_config(detector=DETECTOR)
    run_dir = tmp_path / "run"
    with stack_up(config, path, run_dir, tmp_path / "h5", START_S) as client:
        host = socket.gethostname()
        running = {service.name: service.pid for service in load_running(run_dir)}
        before = sorted(record.uid for record in client.nodegroups())

        second = sectorflow_command("producer", "--config", str(path), "--receiver", "0", timeout_s=60)
        assert second.returncode == 1, second.stdout + second.stderr
        assert second.stderr.splitlines()[-1].startswith(
            f"sectorflow producer: error: a producer daemon for receiver 0 is running already (host {host}, "
            f"pid {running['producer-0']}; its status "), second.stderr

        # The job's rank 0 says whose NodeGroups these are: the pid of one of the running job's ranks.
        ranks = {status.extra["pid"] for (_, uid), status in client.statuses("nodegroup").items() if uid in before}
        job = subprocess.run(
            [shutil.which("mpiexec") or "mpiexec", "-n", "1", sys.executable, "-m", "sectorflow", "nodegroup",
             "--config", str(path), "--output", str(tmp_path / "second")],
            capture_output=True, text=True, timeout=120, env={**os.environ, **dict(mpiexec_environment(config))},
        )
        assert job.returncode != 0, job.stdout + job.stderr
        refusal = next((line for line in job.stderr.splitlines() if "NodeGroup job 'nodegroups'" in line), "")
        assert refusal.startswith("sectorflow nodegroup: error: NodeGroup job 'nodegroups' of this stack is running "
                                  f"already (host {host}, pid "), job.stderr
        assert any(f"pid {pid};" in refusal for pid in ranks), (refusal, ranks)
        assert sorted(record.uid for record in client.nodegroups()) == before

        # The first stack serves on: the next scan is whole.
        scan = sectorflow_command("acquire", "--config", str(path), "--scan-shape", "6x6", "--wait", "--timeout",
                                  "120", timeout_s=180)
        assert scan.returncode == 0, scan.stdout + scan.stderr
        assert "complete: 144 counted + 0 spilled + 0 missing = 144 sectors" in scan.stdout
