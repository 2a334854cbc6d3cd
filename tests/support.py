"""Helpers every test may import (``from support import wait_until``): waiting on a condition
with a deadline, real processes on the one Supervisor, the NodeGroup stand-in's records. Free
ports and TOML files come from ``harness``, which the benchmarks share.

No test sleeps to synchronise: ``wait_until`` polls a condition and fails with a message naming
what it waited for when the deadline passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import stempy.image

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.orchestration import ServiceSpec, Supervisor
from sectorflow.simulator import simulator_from_config
from sectorflow.waiting import WaitTimeout
from sectorflow.waiting import wait_until as shared_wait_until

REPO = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"  # where the services of a test listen
STOP_S = 10.0  # from SIGTERM to SIGKILL when a test stops a process


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.02) -> Any:
    """Poll ``condition`` until it returns a truthy value; fail the test naming ``what`` after ``timeout_s``."""
    try:
        return shared_wait_until(condition, timeout_s, what, interval_s)
    except WaitTimeout as timeout:
        pytest.fail(str(timeout))


def assert_counted_as_stempy(config: Any, path: Path, scan: int, scan_xy: tuple[int, int], background: float,
                             xray: float) -> None:
    """The file at ``path`` holds every position of a ``scan_xy`` (x, y) scan, none missing or
    incomplete, each with the events stempy counts in the simulated frame at these thresholds."""
    scan_x, scan_y = scan_xy
    counted = read_counted_scan(path)
    assert counted.scan_shape == (scan_y, scan_x)
    assert len(counted.missing_positions) == 0 and len(counted.incomplete_positions) == 0
    simulator = simulator_from_config(config)
    dark = np.zeros((config.detector.frame_rows, config.detector.frame_cols))
    for position in range(scan_x * scan_y):
        expected = stempy.image.electron_count_frame(simulator.frame(scan, position), darkreference=dark,
                                                     background_threshold=background, xray_threshold=xray).data[0, 0]
        np.testing.assert_array_equal(counted.events[position], expected, err_msg=f"scan {scan}, position {position}")


class Processes:
    """Real subprocesses started by a test, each a process of one Supervisor logging to
    ``<log_dir>/<name>.log``; the ``processes`` fixture stops all of them at teardown."""

    def __init__(self, log_dir: Path) -> None:
        self.supervisor = Supervisor(log_dir, STOP_S)
        self._names: dict[subprocess.Popen, str] = {}

    def start(self, *args: str, name: str = "proc", env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``args``; stdout and stderr go to its log (see ``output``). A name used before
        in this test gets a number, so that every process keeps a log of its own."""
        unique, number = name, 1
        while unique in self._names.values():
            number += 1
            unique = f"{name}-{number}"
        process = self.supervisor.start(ServiceSpec(unique, args), env)
        self._names[process] = unique
        return process

    def sectorflow(self, *args: str, name: str = "sectorflow", env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start the ``sectorflow`` CLI of this interpreter's environment."""
        return self.start(sys.executable, "-m", "sectorflow", *args, name=name, env=env)

    def output(self, process: subprocess.Popen) -> str:
        """Everything the process wrote so far."""
        return self.supervisor.log_path(self._names[process]).read_text(errors="replace")

    def stop(self, process: subprocess.Popen, timeout_s: float = STOP_S) -> int | None:
        """SIGTERM the process group, SIGKILL after ``timeout_s``; returns the exit code."""
        return self.supervisor.stop(self._names[process], timeout_s)

    def stop_all(self) -> None:
        self.supervisor.stop_all()


STANDIN = Path(__file__).resolve().parent / "standins" / "nodegroup_standin.py"


def read_jsonl(path: Path) -> list[dict]:
    """The lines a stand-in recorded so far (a partly written last line is left for later)."""
    if not path.exists():
        return []
    lines = path.read_text().split("\n")
    return [json.loads(line) for line in lines[:-1] if line]


def sectorflow_command(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    """``python -m sectorflow ARGS`` to completion, output captured."""
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True,
                          timeout=timeout_s)


@contextmanager
def stack_up(config: Any, path: Path, run_dir: Path, output: Path, start_s: float = 60.0,
             nodegroups: bool = True) -> Iterator[Any]:
    """``sectorflow up`` of the configuration at ``path`` (``--no-nodegroups`` unless ``nodegroups``);
    yields a kvstore client once its two NodeGroups are registered; ``sectorflow down`` on exit
    (asserted clean)."""
    from sectorflow.kvstore import Client, client_options

    up = sectorflow_command("up", "--config", str(path), "--run-dir", str(run_dir), "--output", str(output),
                            *(() if nodegroups else ("--no-nodegroups",)))
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        with Client(client_options(config)) as client:
            if nodegroups:
                wait_until(lambda: len(client.nodegroups()) == 2, start_s, "two NodeGroups to register")
            yield client
    finally:
        down = sectorflow_command("down", "--config", str(path), "--run-dir", str(run_dir))
        assert down.returncode == 0, down.stderr


@contextmanager
def small_disk(where: Path, size: str = "1m") -> Iterator[SimpleNamespace]:
    """A tmpfs of ``size`` mounted at ``where`` (made) for the test, unmounted after it; ``fill()``
    fills it up to the last byte, ``free()`` gives that room back. Mounting needs root, which the
    test suite runs as (as the Slurm tests do)."""
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root, which the test suite runs as (as the Slurm tests do)")
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    filler = where / "filler"

    def fill() -> None:
        with open(filler, "ab", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass

    try:
        yield SimpleNamespace(path=where, fill=fill, free=lambda: filler.unlink(missing_ok=True))
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)
