"""Start, watch and stop a set of local service processes, each logging to its own file.

The state of a running set is kept in ``<run_dir>/services.json`` so that ``sectorflow down``,
another process, can stop what ``sectorflow up`` started.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from sectorflow.errors import SectorflowError

log = logging.getLogger(__name__)
STATE_FILE = "services.json"


@dataclass(frozen=True)
class ServiceSpec:
    """One service to run: its name (also its log file's name) and its command line."""

    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class RunningService:
    name: str
    pid: int
    argv: tuple[str, ...]
    log: str


class Supervisor:
    """Runs services as process-group leaders so that a stop reaches their children (mpiexec ranks)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._processes: dict[str, subprocess.Popen] = {}
        self._running: list[RunningService] = []

    def start(self, spec: ServiceSpec, env: dict[str, str] | None = None) -> RunningService:
        """Start ``spec`` with stdout and stderr in ``<run_dir>/<name>.log``."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.run_dir / f"{spec.name}.log"
        with open(log_path, "ab") as handle:
            process = subprocess.Popen(list(spec.argv), stdin=subprocess.DEVNULL, stdout=handle,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       env={**os.environ, **(env or {})})
        service = RunningService(spec.name, process.pid, spec.argv, str(log_path))
        self._processes[spec.name] = process
        self._running.append(service)
        self._save()
        log.info("started %s (pid %d), log %s", spec.name, process.pid, log_path)
        return service

    def check(self) -> None:
        """Raise SectorflowError naming the first service that has exited, with its log's tail."""
        for service in self._running:
            code = self._processes[service.name].poll()
            if code is not None:
                raise SectorflowError(f"{service.name} exited with code {code}; last lines of {service.log}:\n"
                                      f"{tail(Path(service.log))}")

    def stop_all(self, timeout_s: float = 20.0) -> None:
        """Stop every service, newest first: SIGTERM, then SIGKILL after ``timeout_s``."""
        stop_services(list(reversed(self._running)), timeout_s)
        for process in self._processes.values():
            process.poll()
        self._running.clear()
        self._save()

    def _save(self) -> None:
        (self.run_dir / STATE_FILE).write_text(json.dumps([asdict(s) for s in self._running], indent=2))


def load_running(run_dir: Path) -> list[RunningService]:
    """The services a Supervisor recorded in ``run_dir``; empty if none."""
    path = run_dir / STATE_FILE
    if not path.exists():
        return []
    try:
        return [RunningService(d["name"], d["pid"], tuple(d["argv"]), d["log"]) for d in json.loads(path.read_text())]
    except (ValueError, KeyError, TypeError) as error:
        raise SectorflowError(f"{path}: not a services file written by 'sectorflow up' ({error})") from None


def _alive(service: RunningService) -> bool:
    # A recorded pid may have been reused by an unrelated process since: check its command line.
    try:
        cmdline = Path(f"/proc/{service.pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{service.pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False
    return [part.decode(errors="replace") for part in cmdline if part] == list(service.argv)


def stop_services(services: list[RunningService], timeout_s: float) -> None:
    """SIGTERM each live service's process group, wait, then SIGKILL the stragglers."""
    for service in services:
        if _alive(service):
            log.info("stopping %s (pid %d)", service.name, service.pid)
            _signal_group(service.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for service in services:
        while _alive(service) and time.monotonic() < deadline:
            _reap(service.pid)
            time.sleep(0.05)  # polling a process's exit against a deadline
        if _alive(service):
            log.warning("%s did not stop within %.0f s: killing it", service.name, timeout_s)
            _signal_group(service.pid, signal.SIGKILL)
        _reap(service.pid)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file ('' if it does not exist)."""
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
