"""The processes one benchmark run starts, owned by a context manager that stops them all.

Each process runs in its own session (so that a stop reaches its children too), writes its
stderr to a log file in the run's directory and speaks one JSON object per stdout line. Leaving
the ``with`` block, normally or by an exception, stops whatever still runs: SIGTERM to the process
group, then SIGKILL after a deadline.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

STOP_TIMEOUT_S = 10.0


class ProcessError(RuntimeError):
    """A benchmark process failed or did not answer in time; the message ends with its log's tail."""


class ProcessSet:
    """Start, talk to and stop the processes of one run.

    :param log_dir: where ``<name>.log`` (stderr) of every process goes.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._pending: dict[str, bytes] = {}  # stdout read but not yet a whole line

    def __enter__(self) -> ProcessSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` as ``name`` (unique in the set)."""
        if name in self._processes:
            raise ValueError(f"a process named {name} already runs in this set")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}.log", "w") as log:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                       bufsize=0, start_new_session=True, env={**os.environ, **(env or {})})
        self._processes[name] = process
        self._pending[name] = b""
        return process

    def pid(self, name: str) -> int:
        return self._processes[name].pid

    def exited(self, name: str) -> int | None:
        """``name``'s exit code, None while it runs."""
        return self._processes[name].poll()

    def names(self) -> list[str]:
        return list(self._processes)

    def read_json(self, name: str, timeout_s: float) -> dict[str, Any]:
        """The next JSON line ``name`` prints, within ``timeout_s``.

        Raises ProcessError if it exits first, prints something else or stays silent too long.
        """
        process = self._processes[name]
        assert process.stdout is not None
        # Unbuffered reads of the pipe itself: a line already read stays in _pending, never in a
        # buffer that select() cannot see.
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._pending[name]:
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(process.stdout.fileno(), 65536) if ready else b""
            if not chunk:
                state = f"closed its output (exit code {process.poll()})" if ready else f"said nothing for {timeout_s:g} s"
                raise ProcessError(f"{name} {state}; last lines of its log:\n{self.log_tail(name)}")
            self._pending[name] += chunk
        line, self._pending[name] = self._pending[name].split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            raise ProcessError(f"{name} printed {line.strip()!r}, not a JSON line") from None

    def wait(self, name: str, timeout_s: float) -> int:
        """Wait for ``name`` to exit on its own; raises ProcessError if it has not within ``timeout_s``
        or exited with an error."""
        process = self._processes[name]
        try:
            code = process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise ProcessError(f"{name} still runs after {timeout_s:g} s; last lines of its log:\n"
                               f"{self.log_tail(name)}") from None
        if code != 0:
            raise ProcessError(f"{name} exited with code {code}; last lines of its log:\n{self.log_tail(name)}")
        return code

    def stop(self, name: str, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM ``name``'s process group, then SIGKILL after ``timeout_s``; returns its exit code."""
        process = self._processes.pop(name)
        self._pending.pop(name, None)
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait(timeout_s)
        if process.stdout is not None:
            process.stdout.close()
        return process.returncode

    def stop_all(self) -> None:
        """Stop every process still in the set, newest first (relays before what they feed on)."""
        for name in reversed(list(self._processes)):
            self.stop(name)

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
