"""Talk to Slurm through its client commands: submit, list and cancel session jobs."""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sectorflow.errors import SectorflowError

from .session_script import JOB_NAME

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionJob:
    """One streaming-session job as squeue reports it."""

    job_id: str
    state: str
    time_used: str
    time_limit: str
    nodes: str


def _run(args: list[str], what: str, stdin: str | None = None) -> str:
    if shutil.which(args[0]) is None:
        raise SectorflowError(f"{args[0]} not found: {what} needs the Slurm client commands on the PATH")
    result = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if result.returncode != 0:
        raise SectorflowError(f"{what} failed: {' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def submit(script: str, workdir: Path) -> str:
    """Submit ``script`` with sbatch from ``workdir``; returns the job id."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = _run(["sbatch", "--parsable", f"--chdir={workdir}"], "submitting the session", stdin=script)
    job_id = out.strip().split(";")[0]
    log.info("submitted session job %s", job_id)
    return job_id


def list_sessions() -> list[SessionJob]:
    """Session jobs of this user that Slurm still knows (pending or running)."""
    out = _run(["squeue", "--noheader", f"--name={JOB_NAME}", "--me", "--format=%i|%T|%M|%l|%D"],
               "listing sessions")
    return [SessionJob(*line.split("|")) for line in out.splitlines() if line.strip()]


def cancel(job_id: str) -> None:
    """Cancel a session job; its NodeGroups deregister on the SIGTERM Slurm sends them."""
    if not job_id.isdigit():
        raise SectorflowError(f"job id {job_id!r}: expected a number as shown by 'sectorflow session list'")
    known = {job.job_id for job in list_sessions()}
    if job_id not in known:
        raise SectorflowError(f"job {job_id} is not a running or pending session (see 'sectorflow session list')")
    _run(["scancel", job_id], f"cancelling job {job_id}")
    log.info("cancelled session job %s", job_id)
