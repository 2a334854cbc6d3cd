"""A kvstore with durable records (kvstore/SPEC.md, "Durable records") killed and restarted between
scans of a running `sectorflow up` stack: the operator's view of earlier scans survives it, and so
does the stack's id: no service says it was moved to another stack ("The stack's identity")."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support import Processes, sectorflow_command, stack_up, wait_until

from sectorflow.kvstore import STACK_CHANGED_FIELD, STACK_ID_FIELD
from sectorflow.orchestration import load_running

pytestmark = pytest.mark.mpi

SMALL_DETECTOR = {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}
START_S, STATUS_S = 60.0, 30.0


def scan_row(status_output: str, scan: int) -> str:
    """The row of ``scan`` in the recent scans' table of ``sectorflow status``."""
    rows = [line for line in status_output.splitlines() if line.split()[:1] == [str(scan)] and " x " in line]
    assert len(rows) == 1, status_output
    return rows[0]


def header_stack(status_output: str) -> str:
    """The stack id in the first line of ``sectorflow status``."""
    return status_output.split(": stack ", 1)[1].split(",", 1)[0]


def acquire(path: Path) -> str:
    """``sectorflow acquire --wait`` of the next scan number; its output."""
    acquired = sectorflow_command("acquire", "--config", str(path), "--scan-shape", "4x4", "--wait", "--timeout", "120")
    assert acquired.returncode == 0, acquired.stdout + acquired.stderr
    return acquired.stdout


def test_a_kvstore_killed_and_restarted_between_scans_keeps_the_earlier_scan_and_its_account(
    make_config, processes: Processes, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    config, path = make_config(detector=SMALL_DETECTOR, kvstore={"log_dir": str(run_dir / "kvstore")},
                               dashboard={"with_stack": False})
    with stack_up(config, path, run_dir, tmp_path / "h5", START_S) as client:
        acquire(path)
        before = sectorflow_command("status", "--config", str(path))
        assert before.returncode == 0, before.stderr
        row = scan_row(before.stdout, 1)
        assert "complete" in row

        kvstore = next(service for service in load_running(run_dir) if service.name == "kvstore")
        os.kill(kvstore.pid, signal.SIGKILL)
        wait_until(lambda: not Path(f"/proc/{kvstore.pid}").exists() or _zombie(kvstore.pid), STATUS_S,
                   "the kvstore to die")
        # Only the kvstore comes back, as an operator would restart it.
        again = processes.sectorflow("kvstore", "--config", str(path), name="kvstore-again")

        def status_after() -> str:
            result = sectorflow_command("status", "--config", str(path))
            return result.stdout if result.returncode == 0 and " x " in result.stdout else ""

        after = wait_until(status_after, STATUS_S, "sectorflow status to answer from the restarted kvstore")
        assert scan_row(after, 1) == row, after
        assert "loaded" in processes.output(again)
        # The claim of scan 1 survived too: the next acquire without a number takes 2, and it is whole.
        assert "scan 2" in acquire(path)
        final = sectorflow_command("status", "--config", str(path)).stdout
        assert scan_row(final, 1) == row and "complete" in scan_row(final, 2), final

        # The same stack: the same id in the header, every service's status in it, none flagged or warned.
        stack = header_stack(before.stdout)
        assert header_stack(final) == stack and "STACK" not in final, final
        statuses = client.statuses()
        assert {status.extra.get(STACK_ID_FIELD) for (service, _), status in statuses.items()
                if service != "kvstore"} == {stack}, statuses
        assert not any(STACK_CHANGED_FIELD in status.extra for status in statuses.values())
        for service in load_running(run_dir):
            assert "another stack" not in Path(service.log).read_text(errors="replace"), service.name


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
