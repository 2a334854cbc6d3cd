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


# Slurm's clients retry a configuration or controller they cannot reach for a minute: a user waits less.
COMMAND_TIMEOUT_S = 30.0
# What Slurm's client commands say when no cluster is configured or its controller does not answer.
NO_CLUSTER = ("Could not establish a configuration source", "Unable to contact slurm controller")


def _run(args: list[str], what: str, stdin: str | None = None) -> str:
    if shutil.which(args[0]) is None:
        raise SectorflowError(f"{args[0]} not found: {what} needs the Slurm client commands on the PATH")
    try:
        result = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SectorflowError(f"{what} failed: {args[0]} did not answer within {COMMAND_TIMEOUT_S:.0f} s (a Slurm "
                              "controller that does not answer, or a SLURM_CONF it keeps retrying to read)") from None
    if result.returncode != 0:
        # Slurm's commands explain in several lines; the last says what stopped them.
        said = (result.stderr.strip() or result.stdout.strip()).splitlines()
        reason = said[-1] if said else f"exit code {result.returncode}"
        if any(sign in reason for sign in NO_CLUSTER):
            raise SectorflowError(f"{what} failed: no Slurm cluster answers from this host ({reason}): run it where "
                                  f"{args[0]} works, or point SLURM_CONF at the cluster's slurm.conf")
        raise SectorflowError(f"{what} failed: {' '.join(args)}: {reason}")
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
