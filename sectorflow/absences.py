"""When a status or registration that stays away is a death: a kvstore restart empties every replica
for a moment (until each client has re-published its keys), which must not pass for one.

``sectorflow acquire --wait`` (producers and NodeGroups of its scan) and each NodeGroup rank's watch of
dead producers (consumer/nodegroup/death_watch.py) take a name for dead only once it has been absent, as they
see it, for ``gone_after_s``.
"""

from __future__ import annotations

from time import monotonic

from sectorflow.configs import Config

# Beyond the kvstore ttl and two of the clients' silence periods: a replica resyncing after a restart.
GONE_GRACE_S = 2.0


def gone_after_s(config: Config) -> float:
    """How long a name must stay absent to be taken for dead: the ttl, two silence periods, a grace."""
    kv = config.kvstore
    return kv.ttl_s + 2 * kv.heartbeat_ms * kv.silence_heartbeats / 1000 + GONE_GRACE_S


class Absences:
    """Which names have been absent for at least ``grace_s``, by the calls to ``lasting``."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._since: dict[str, float] = {}

    def lasting(self, absent: set[str]) -> set[str]:
        """Of ``absent`` (the names absent now), those absent since ``grace_s`` ago; a name present in
        between starts again."""
        now = monotonic()
        self._since = {name: self._since.get(name, now) for name in absent}
        return {name for name, since in self._since.items() if now - since >= self.grace_s}
