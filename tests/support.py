"""Helpers every test may import (``from support import wait_until``): waiting on a condition
with a deadline, supervised real processes, the NodeGroup stand-in's records. Free ports and TOML
files come from ``harness``, which the benchmarks share.

No test sleeps to synchronise: ``wait_until`` polls a condition and fails with a message naming
what it waited for when the deadline passes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sectorflow.waiting import WaitTimeout
from sectorflow.waiting import wait_until as shared_wait_until

REPO = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"  # where the services of a test listen


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.02) -> Any:
    """Poll ``condition`` until it returns a truthy value; fail the test naming ``what`` after ``timeout_s``."""
    try:
        return shared_wait_until(condition, timeout_s, what, interval_s)
    except WaitTimeout as timeout:
        pytest.fail(str(timeout))


def deep_update(base: dict, overrides: dict) -> dict:
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = value
    return base


class Processes:
    """Real subprocesses started by a test; all are stopped (TERM, then KILL) at teardown."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[tuple[subprocess.Popen, Path]] = []

    def start(self, *args: str, name: str = "proc", env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``args``; stdout and stderr go to ``<log_dir>/<name>.log`` (see ``log``)."""
        log = self.log_dir / f"{name}.log"
        handle = open(log, "wb")
        process = subprocess.Popen(
            list(args), stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})}, start_new_session=True,
        )
        handle.close()
        self.started.append((process, log))
        return process

    def sectorflow(self, *args: str, name: str = "sectorflow", env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start the ``sectorflow`` CLI of this interpreter's environment."""
        return self.start(sys.executable, "-m", "sectorflow", *args, name=name, env=env)

    @staticmethod
    def log(process: subprocess.Popen, processes: "Processes") -> str:
        for p, log in processes.started:
            if p is process:
                return log.read_text(errors="replace")
        return ""

    def output(self, process: subprocess.Popen) -> str:
        """Everything the process wrote so far."""
        return Processes.log(process, self)

    def stop(self, process: subprocess.Popen, timeout_s: float = 10.0) -> int:
        """SIGTERM the process group, SIGKILL after ``timeout_s``; returns the exit code."""
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout_s)
        return process.returncode

    def stop_all(self) -> None:
        for process, _ in reversed(self.started):
            self.stop(process)


STANDIN = Path(__file__).resolve().parent / "standins" / "nodegroup_standin.py"


def read_jsonl(path: Path) -> list[dict]:
    """The lines a stand-in recorded so far (a partly written last line is left for later)."""
    if not path.exists():
        return []
    lines = path.read_text().split("\n")
    return [json.loads(line) for line in lines[:-1] if line]
