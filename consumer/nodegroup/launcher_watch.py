"""A rank whose launcher is gone leaves: the job's ``mpiexec`` (or its proxy) was killed.

Under MPICH's Hydra, as under Slurm's PMI-1 and PMI-2, each rank holds its launcher's PMI
connection as an inherited socket whose number ``PMI_FD`` names. A launcher that dies closes it,
and Linux tells the other end the peer hung up (``POLLRDHUP``) without reading from it, so MPI's
own use of the connection is untouched. Outside a container a killed ``mpiexec`` takes its ranks'
process group with it; a rank in a container of its own (``image/mpi-rank``) is outside that group
and would serve on, a job nobody can stop, if it did not watch.
"""

from __future__ import annotations

import logging
import os
import select
import stat
from collections.abc import Mapping

log = logging.getLogger(__name__)

_HUNG_UP = select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL


class LauncherWatch:
    """Polls the PMI connection of ``environ`` (``PMI_FD``); without one (a singleton run, PMIx),
    nothing is watched and :meth:`gone` stays False."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self.fd: int | None = None
        self._poll = select.poll()
        try:
            fd = int(environ.get("PMI_FD", ""))
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                raise ValueError(f"PMI_FD {fd} is not a socket")
        except (ValueError, OSError) as error:
            if environ.get("PMI_FD"):
                log.warning("the launcher's connection is not watched: %s", error)
            return
        self.fd = fd
        self._poll.register(fd, select.POLLRDHUP)

    def gone(self) -> bool:
        """Whether the launcher's end of the connection hung up (without waiting)."""
        if self.fd is None:
            return False
        return any(events & _HUNG_UP for _, events in self._poll.poll(0))
