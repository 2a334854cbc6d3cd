"""Streaming sessions (Slurm jobs running NodeGroups) with their time left, for the page.

Read through ``operations/slurm.py`` (``squeue``) on a thread of its own every ``poll_s``, so a
slow Slurm controller never holds the page. The page shows its card only where Slurm is configured:
``squeue`` is on the PATH and has answered once (a host with Slurm's commands but no cluster, such
as a local stack, has none); once it has answered, a later failure is shown, not hidden.
"""

from __future__ import annotations

import logging
import shutil
import threading
from dataclasses import asdict, dataclass

from sectorflow.errors import SectorflowError
from sectorflow.operations.slurm import list_sessions

log = logging.getLogger(__name__)

POLL_S = 5.0


@dataclass(frozen=True)
class Session:
    job_id: str
    state: str
    time_used: str
    time_limit: str
    nodes: str
    time_left_s: float | None  # None: no limit, or a limit Slurm did not state


def slurm_seconds(text: str) -> float | None:
    """Seconds of a Slurm duration (``[D-][HH:]MM:SS``, ``MM``); None for UNLIMITED or anything else."""
    text = text.strip()
    days = 0
    if "-" in text:
        day_part, text = text.split("-", 1)
        if not day_part.isdigit():
            return None
        days = int(day_part)
    parts = text.split(":")
    if not parts or not all(part.isdigit() for part in parts) or len(parts) > 3:
        return None
    numbers = [int(part) for part in parts]
    if len(numbers) == 1:
        numbers = [0, numbers[0], 0]  # minutes
    elif len(numbers) == 2:
        numbers = [0, *numbers]
    hours, minutes, seconds = numbers
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def session_of(job: object) -> Session:
    used, limit = slurm_seconds(job.time_used), slurm_seconds(job.time_limit)  # type: ignore[attr-defined]
    left = None if used is None or limit is None else max(0.0, limit - used)
    return Session(job.job_id, job.state, job.time_used, job.time_limit, job.nodes, left)  # type: ignore[attr-defined]


class SessionWatcher:
    """The sessions ``squeue`` lists, refreshed in the background; ``snapshot()`` for the page."""

    def __init__(self, poll_s: float = POLL_S) -> None:
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._sessions: list[Session] = []
        self._error = "" if shutil.which("squeue") else "Slurm's client commands (squeue) are not on this host's PATH"
        self._full_error = self._error
        self._answered = False  # squeue has answered once: Slurm is configured here
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sessions", daemon=True)

    def start(self) -> None:
        if not self._error:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.poll_s + 5)

    def refresh(self) -> None:
        """Reads the sessions now (also after a submit or cancel from the page)."""
        try:
            sessions, error = [session_of(job) for job in list_sessions()], ""
        except SectorflowError as failure:
            sessions, error = [], str(failure)
        with self._lock:
            if error and error != self._full_error:
                log.warning("sessions: %s", error)
            self._full_error = error
            self._answered = self._answered or not error
            # The page shows Slurm's last word (e.g. "Could not establish a configuration source"); the log has it all.
            self._sessions, self._error = sessions, (f"squeue: {error.rsplit(': ', 1)[-1]}" if error else "")

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {"configured": self._answered, "available": not self._error, "error": self._error,
                    "sessions": [asdict(session) for session in self._sessions]}

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self.poll_s)  # the polling period of squeue, not a synchronisation
