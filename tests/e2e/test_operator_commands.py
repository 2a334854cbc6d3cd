"""What an operator sees first from the scan loop's commands on a running stack, and their exit
codes: `acquire` and `abort` print their own lines, no kvstore connection lines
unless -v; a scan number used before is a bad argument (exit 2, as --help says); `view --scan N` of a
finished scan names its file; a configuration edited while the stack runs is named by `status` and
a second `up` (restart to apply)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import sectorflow_command, stack_up

from sectorflow.consumer.nodegroup import scan_file_name

pytestmark = pytest.mark.mpi


def test_the_scan_loops_commands_say_their_own_lines_first_and_exit_as_help_says(make_config, tmp_path: Path) -> None:
    config, path = make_config()
    output, run_dir = tmp_path / "h5", tmp_path / "run"
    with stack_up(config, path, run_dir, output):
        acquired = sectorflow_command("acquire", "--config", str(path), "--scan-shape", "8x8", "--wait")
        assert acquired.returncode == 0, acquired.stderr
        assert acquired.stdout.startswith("scan 1: requested 8 x 8 (simulator), streaming to 2 NodeGroups: ")
        assert "kvstore" not in acquired.stderr and "not yet taken" not in acquired.stderr, acquired.stderr

        again = sectorflow_command("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", "8x8")
        assert again.returncode == 2 and again.stdout == ""
        assert again.stderr.startswith("sectorflow acquire: error: scan 1 was acquired before (outcome complete: ")
        assert again.stderr.count("\n") == 1

        loud = sectorflow_command("acquire", "-v", "--config", str(path), "--scan-shape", "8x8", "--wait")
        assert loud.returncode == 0 and loud.stdout.startswith("scan 2: requested 8 x 8")
        assert "kvstore" in loud.stderr

        over = sectorflow_command("abort", "--config", str(path), "1")
        assert over.returncode == 1 and over.stderr == "sectorflow abort: error: scan 1 is over (complete); nothing to abort\n"

        viewed = sectorflow_command("view", "--config", str(path), "--scan", "1")
        assert viewed.returncode == 0, viewed.stderr
        assert viewed.stdout.startswith(f"scan 1: finished (complete); its file: {output / scan_file_name(1)}\n"
                                        "scan 1: 64 of 64 positions counted (complete)\n"), viewed.stdout

        # The file edited while the stack runs: the services still run with what they read at start.
        path.write_text(path.read_text().replace("dose_per_frame = 20.0", "dose_per_frame = 40.0"))
        note = (f"{path} changed since the stack started (simulator.dose_per_frame): restart to apply ('sectorflow "
                f"down --config {path} --run-dir {run_dir}', then 'sectorflow up --config {path} --run-dir {run_dir}')")
        status = sectorflow_command("status", "--config", str(path), "--run-dir", str(run_dir))
        assert status.returncode == 0 and status.stdout.splitlines()[0] == note, status.stdout
        second = sectorflow_command("up", "--config", str(path), "--run-dir", str(run_dir))
        assert second.returncode == 1 and second.stderr.splitlines()[-1].endswith(f"; {note}"), second.stderr
