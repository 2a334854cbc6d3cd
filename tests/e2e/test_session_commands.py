"""`sectorflow session submit | list | cancel` against a real single-node Slurm cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import wait_until

pytestmark = pytest.mark.slurm


def sectorflow(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True, env=env,
                          timeout=60)


def test_submit_list_cancel_a_session(slurm, slurm_env, make_config, tmp_path: Path) -> None:
    # A template whose job only waits, so this test exercises the commands, not the NodeGroups.
    template = tmp_path / "wait.sh.j2"
    template.write_text("#!/bin/bash\n#SBATCH --job-name={{ job_name }}\n#SBATCH --time={{ time }}\n"
                        "#SBATCH --output={{ log_dir }}/{{ job_name }}-%j.log\nexec sleep 600\n")
    _, path = make_config(slurm={"template": str(template)})
    submitted = sectorflow(slurm_env, "session", "submit", "--config", str(path), "--time", "00:05:00",
                           "--log-dir", str(tmp_path / "logs"))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[3]
    assert job_id.isdigit()

    def state() -> str:
        listing = sectorflow(slurm_env, "session", "list", "--config", str(path)).stdout
        rows = [line.split() for line in listing.splitlines() if line.split() and line.split()[0] == job_id]
        return rows[0][1] if rows else ""

    wait_until(lambda: state() == "RUNNING", 30, f"job {job_id} to run")
    cancelled = sectorflow(slurm_env, "session", "cancel", "--config", str(path), job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == f"cancelled session job {job_id}\n"
    wait_until(lambda: state() == "", 30, f"job {job_id} to leave the queue")
    assert sectorflow(slurm_env, "session", "list", "--config", str(path)).stdout == "no sessions\n"


def test_cancel_of_an_unknown_job_is_a_clear_error(slurm, slurm_env, make_config) -> None:
    _, path = make_config()
    result = sectorflow(slurm_env, "session", "cancel", "--config", str(path), "99999")
    assert result.returncode == 1
    assert "job 99999 is not a running or pending session" in result.stderr


def test_without_a_slurm_cluster_list_and_cancel_say_so_in_one_line(make_config) -> None:
    # Slurm's clients installed (make test installs them) but no cluster configured for this host.
    _, path = make_config()
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM")}
    for args in (("list",), ("cancel", "12")):
        result = sectorflow(env, "session", *args, "--config", str(path))
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert "no Slurm cluster answers from this host (squeue: " in result.stderr
        assert result.stderr.endswith("point SLURM_CONF at the cluster's slurm.conf\n")
