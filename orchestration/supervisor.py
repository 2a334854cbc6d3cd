"""Start, watch and stop local processes, each logging to its own file: the one supervisor of
sectorflow's local stack, its tests and its benchmarks.

Every process leads its own process group, so that a stop reaches its children too (the ranks
under ``mpiexec``): SIGTERM to the group, then SIGKILL after a deadline. The processes a supervisor
runs are kept in ``<run_dir>/services.json`` so that ``sectorflow down``, another process, can
stop what ``sectorflow up`` started.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

from sectorflow.errors import SectorflowError
from sectorflow.waiting import WaitTimeout, wait_until

log = logging.getLogger(__name__)
STATE_FILE = "services.json"
STOP_TIMEOUT_S = 20.0  # from SIGTERM to SIGKILL, unless the caller says otherwise
EXIT_POLL_S = 0.05  # polling period of a wait for processes to exit
READ_SLICE_S = 0.1  # longest single wait for a process's output; the caller's deadline bounds the whole


@dataclass(frozen=True)
class ServiceSpec:
    """One process to run: its name (also its log file's name), its command line and what it adds to
    the environment it inherits."""

    name: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RunningService:
    """A started process as the state file records it."""

    name: str
    pid: int
    argv: tuple[str, ...]
    log: str


class Supervisor:
    """Runs processes as process-group leaders in ``run_dir``; a ``with`` block stops them all on exit.

    :param run_dir: where ``<name>.log`` of every process and the state file go.
    :param stop_timeout_s: from SIGTERM to SIGKILL when a stop names no timeout.
    :param recorded: services another Supervisor started in ``run_dir`` (a running stack's, ``up
        --only``): kept in the state file beside this one's, never stopped by it.
    """

    def __init__(self, run_dir: Path, stop_timeout_s: float = STOP_TIMEOUT_S,
                 recorded: list[RunningService] | None = None) -> None:
        self.run_dir = run_dir
        self.stop_timeout_s = stop_timeout_s
        self._recorded = list(recorded or [])
        self._processes: dict[str, subprocess.Popen[bytes]] = {}  # every process started, stopped ones too
        self._specs: dict[str, ServiceSpec] = {}  # what each was started from
        self._running: list[RunningService] = []  # started and not yet stopped, oldest first
        self._pending: dict[str, bytes] = {}  # stdout read but not yet a whole line

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def start(self, spec: ServiceSpec, env: dict[str, str] | None = None, *,
              capture_stdout: bool = False) -> subprocess.Popen[bytes]:
        """Start ``spec`` with stdout and stderr in ``<run_dir>/<name>.log``; returns its process.

        ``spec.env``, then ``env``, are added to this process's environment. With ``capture_stdout``, stdout comes back
        through a pipe instead, read with ``read_line``. Raises ValueError if ``spec.name`` was
        started before by this supervisor (it names the log file).
        """
        if spec.name in self._processes:
            raise ValueError(f"a process named {spec.name} was already started in {self.run_dir}")
        argv = tuple(str(arg) for arg in spec.argv)  # paths too, as the state file records them
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_path(spec.name)
        with open(log_path, "ab") as handle:
            process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE if capture_stdout else handle,
                                       stderr=handle if capture_stdout else subprocess.STDOUT,
                                       bufsize=0, start_new_session=True,
                                       env={**os.environ, **dict(spec.env), **(env or {})})
        self._processes[spec.name] = process
        self._specs[spec.name] = spec
        self._pending[spec.name] = b""
        self._running.append(RunningService(spec.name, process.pid, argv, str(log_path)))
        self._save()
        log.info("started %s (pid %d), log %s", spec.name, process.pid, log_path)
        return process

    def spec(self, name: str) -> ServiceSpec:
        """What the process started as ``name`` was started from."""
        return self._specs[name]

    def process(self, name: str) -> subprocess.Popen[bytes]:
        """The process started as ``name``."""
        return self._processes[name]

    def names(self) -> list[str]:
        """The processes started and not yet stopped, oldest first."""
        return [service.name for service in self._running]

    def exit_code(self, name: str) -> int | None:
        """``name``'s exit code, None while it runs."""
        return self._processes[name].poll()

    def log_path(self, name: str) -> Path:
        """Where the output of the process named ``name`` goes."""
        return self.run_dir / f"{name}.log"

    def log_tail(self, name: str, lines: int = 15) -> str:
        """The last lines of ``name``'s log."""
        return tail(self.log_path(name), lines)

    def check(self) -> None:
        """Raise SectorflowError naming the first running process that has exited, with its log's tail."""
        for service in self._running:
            code = self._processes[service.name].poll()
            if code is not None:
                raise SectorflowError(self._with_tail(f"{service.name} exited with code {code}", service.name))

    def read_line(self, name: str, timeout_s: float) -> str:
        """The next line ``name`` (started with ``capture_stdout``) prints, without its newline.

        Raises SectorflowError if it closes its output first, WaitTimeout if it prints no whole
        line within ``timeout_s``; either message ends with its log's tail.
        """
        try:
            wait_until(lambda: self._line_pending(name), timeout_s, f"a line from {name}", 0.0)
        except WaitTimeout as timeout:
            raise WaitTimeout(self._with_tail(str(timeout), name)) from None
        line, self._pending[name] = self._pending[name].split(b"\n", 1)
        return line.decode(errors="replace")

    def wait(self, name: str, timeout_s: float) -> int:
        """Wait for ``name`` to exit by itself; returns its exit code.

        Raises WaitTimeout, ending with its log's tail, if it still runs after ``timeout_s``.
        """
        process = self._processes[name]
        try:
            wait_until(lambda: process.poll() is not None, timeout_s, f"{name} to exit", EXIT_POLL_S)
        except WaitTimeout as timeout:
            raise WaitTimeout(self._with_tail(str(timeout), name)) from None
        return process.returncode

    def stop(self, name: str, timeout_s: float | None = None) -> int | None:
        """Stop ``name``: SIGTERM, then SIGKILL after ``timeout_s`` (default: the supervisor's).

        Returns its exit code (None if even SIGKILL did not end it).
        """
        self._stop([service for service in self._running if service.name == name], timeout_s)
        return self._processes[name].returncode

    def stop_all(self, timeout_s: float | None = None) -> None:
        """Stop every running process, signalled newest first (what a process feeds on stops last)."""
        self._stop(list(reversed(self._running)), timeout_s)

    def _stop(self, services: list[RunningService], timeout_s: float | None) -> None:
        if not services:
            return
        processes = [self._processes[service.name] for service in services]
        _terminate([_Target(s.name, p.pid, lambda p=p: p.poll() is None) for s, p in zip(services, processes)],
                  self.stop_timeout_s if timeout_s is None else timeout_s)
        for service, process in zip(services, processes):
            if process.stdout is not None:
                process.stdout.close()
            self._running.remove(service)
        self._save()

    def _line_pending(self, name: str) -> bool:
        # Unbuffered reads of the pipe itself: a line already read stays in _pending, never in a
        # buffer that select() cannot see.
        if b"\n" in self._pending[name]:
            return True
        process = self._processes[name]
        assert process.stdout is not None, f"{name} was started without capture_stdout"
        ready, _, _ = select.select([process.stdout], [], [], READ_SLICE_S)
        if not ready:
            return False
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            code = process.poll()  # None: the process may close its stdout a moment before it exits
            state = "still running" if code is None else f"exit code {code}"
            raise SectorflowError(self._with_tail(f"{name} closed its output ({state})", name))
        self._pending[name] += chunk
        return b"\n" in self._pending[name]

    def _with_tail(self, message: str, name: str) -> str:
        return f"{message}; last lines of {self.log_path(name)}:\n{self.log_tail(name)}"

    def _save(self) -> None:
        own = {service.name for service in self._running}
        services = [s for s in self._recorded if s.name not in own] + self._running
        (self.run_dir / STATE_FILE).write_text(json.dumps([asdict(s) for s in services], indent=2))


def load_running(run_dir: Path) -> list[RunningService]:
    """The services a Supervisor recorded in ``run_dir``; empty if none."""
    path = run_dir / STATE_FILE
    if not path.exists():
        return []
    try:
        return [RunningService(d["name"], d["pid"], tuple(d["argv"]), d["log"]) for d in json.loads(path.read_text())]
    except (ValueError, KeyError, TypeError) as error:
        raise SectorflowError(f"{path}: not a services file written by 'sectorflow up' ({error})") from None


def stop_services(services: list[RunningService], timeout_s: float) -> None:
    """Stop recorded services another process started: SIGTERM each live one's process group, wait, then SIGKILL."""
    _terminate([_Target(s.name, s.pid, lambda s=s: _alive(s)) for s in services], timeout_s)


class _Target(NamedTuple):
    name: str
    pid: int
    alive: Callable[[], bool]  # reaps the process when it can, so that an exited child does not linger


def _terminate(targets: list[_Target], timeout_s: float) -> None:
    """SIGTERM each live target's process group in the order given, wait for all of them to exit,
    SIGKILL the groups of those still alive after ``timeout_s``."""
    live = [target for target in targets if target.alive()]
    for target in live:
        log.info("stopping %s (pid %d)", target.name, target.pid)
        _signal_group(target.pid, signal.SIGTERM)
    names = ", ".join(target.name for target in live)
    try:
        wait_until(lambda: not any(target.alive() for target in live), timeout_s, f"{names} to exit", EXIT_POLL_S)
        return
    except WaitTimeout:
        pass
    for target in live:
        if target.alive():
            log.warning("%s did not stop within %.0f s: killing it", target.name, timeout_s)
            _signal_group(target.pid, signal.SIGKILL)
    try:
        wait_until(lambda: not any(target.alive() for target in live), timeout_s, f"{names} to exit", EXIT_POLL_S)
    except WaitTimeout:
        log.warning("%s still alive %.0f s after SIGKILL", names, timeout_s)


def _alive(service: RunningService) -> bool:
    _reap(service.pid)
    # A recorded pid may have been reused by an unrelated process since: check its command line.
    try:
        cmdline = Path(f"/proc/{service.pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{service.pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False
    return [part.decode(errors="replace") for part in cmdline if part] == list(service.argv)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    # A service recorded by this very process (not by another `sectorflow up`) is its child.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file ('' if it does not exist)."""
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
