"""A NodeGroup job is one unit: every rank watches the others' registrations in the kvstore.

Each rank's service loop (not a background thread) refreshes its NodeGroups' registrations
``nodegroups/<uid>`` with a short time-to-live (``[nodegroup] liveness_ttl_s``), so a rank that is
killed, or whose loop hangs (blocked in MPI on a dead peer, say), loses them within that ttl. The
other ranks see them go in their kvstore replicas:

- the registration is gone and the NodeGroup's status (``status/nodegroup/<uid>``, which the
  rank's kvstore client owns and deletes when it closes) says stopping or stopped, or is gone
  after it said so: the rank left cleanly (it was stopped: a leaving rank publishes stopping
  before it erases its registrations) and the job follows;
- the registration is gone for ``liveness_ttl_s / 2`` more (a kvstore server that restarts loses
  every key until its owner writes it again, which a live loop does every ttl / 4) and the status
  never said stopping: the rank died or hung; the job leaves at once and exits non-zero. (A rank
  that stops cleanly says stopping before it erases its registrations, and deletes its status only
  after it has stopped its NodeGroups and said goodbye: a watcher polling every loop sees it.)

Why not MPI: Open MPI's and MPICH's launchers may kill every rank when one dies, or leave the
others blocked on the dead one; the kvstore sees a rank whose loop has stopped, whatever the
launcher does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sectorflow.protocol import (
    STATE_STOPPED,
    STATE_STOPPING,
    ProtocolError,
    ServiceStatus,
    nodegroup_key,
    status_key,
)


@dataclass(frozen=True)
class SiblingGone:
    """A rank of the job whose NodeGroups left the kvstore."""

    rank: int
    uids: tuple[str, ...]
    died: bool  # False: it was stopped and left cleanly

    def describe(self) -> str:
        if self.died:
            return (f"rank {self.rank}'s NodeGroups ({', '.join(self.uids)}) vanished from the kvstore without "
                    "leaving (the rank died or its loop hung)")
        return f"rank {self.rank} left (it was stopped)"


class JobWatch:
    """Watches the other ranks' registrations in a kvstore replica.

    :param get: the replica's value of a key, or None (``Client.get``).
    :param synced: whether the replica is live (``Client.synced``).
    :param uids_by_rank: every rank's NodeGroup uids (from the allgather at start).
    :param rank: this rank (not watched).
    :param liveness_ttl_s: the registrations' ttl.
    """

    def __init__(self, get: Callable[[str], bytes | None], synced: Callable[[], bool],
                 uids_by_rank: list[list[str]], rank: int, liveness_ttl_s: float) -> None:
        self._get = get
        self._synced = synced
        self._siblings = {r: tuple(uids) for r, uids in enumerate(uids_by_rank) if r != rank and uids}
        self._grace_s = liveness_ttl_s / 2
        now = time.monotonic()
        # A registration not in the replica yet (it syncs) counts as seen when the watch starts;
        # only one seen in the replica can have left cleanly.
        self._seen = {uid: now for uids in self._siblings.values() for uid in uids}
        self._ever_seen: set[str] = set()
        self._said_stopping: set[str] = set()
        self.gone: dict[int, SiblingGone] = {}

    def check(self, now: float | None = None) -> SiblingGone | None:
        """The first rank found gone since the last check, or None."""
        now = time.monotonic() if now is None else now
        if not self._synced():
            # A replica that resyncs may lack every key for a moment: judge nobody by it.
            self._seen = dict.fromkeys(self._seen, now)
            return None
        for rank, uids in self._siblings.items():
            if rank in self.gone:
                continue
            for uid in uids:
                if self._get(nodegroup_key(uid)) is not None:
                    self._seen[uid] = now
                    self._ever_seen.add(uid)
                    continue
                if uid in self._ever_seen and self._left(uid):
                    self.gone[rank] = SiblingGone(rank, uids, died=False)
                    return self.gone[rank]
                if now - self._seen[uid] > self._grace_s:
                    self.gone[rank] = SiblingGone(rank, uids, died=True)
                    return self.gone[rank]
        return None

    def dead_ranks(self) -> set[int]:
        return {rank for rank, gone in self.gone.items() if gone.died}

    def _left(self, uid: str) -> bool:
        """Whether the NodeGroup's status says it left cleanly: stopping, stopped, or deleted
        after it said so."""
        raw = self._get(status_key("nodegroup", uid))
        if raw is None:
            return uid in self._said_stopping
        try:
            stopping = ServiceStatus.decode(raw).state in (STATE_STOPPING, STATE_STOPPED)
        except ProtocolError:
            return False
        if stopping:
            self._said_stopping.add(uid)
        return stopping


__all__ = ["JobWatch", "SiblingGone"]
