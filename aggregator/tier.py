"""Which members of the aggregation tier carry a scan (protocol/SPEC.md, "The aggregation tier").

``[aggregator] tier`` lists k members; member i runs ``sectorflow aggregator --member i`` and, while
it relays, publishes ``status/aggregator/t<j>`` for each of its relay threads j = i x R + r (with the
kvstore's ttl, so a member that dies drops out within a ttl). ``sectorflow acquire`` fixes a scan's
members from those statuses when it requests the scan, and records them in the scan's request: frame
f then goes through member ``tier[f mod len(tier)]``, and a member that is down is in no scan
requested after it went down. A member that joins is in the next scan requested.
"""

from __future__ import annotations

from collections.abc import Mapping

from sectorflow.configs import Config
from sectorflow.protocol import STATE_STOPPED, STATE_STOPPING, ServiceStatus
from sectorflow.protocol.scan_parts import relay_thread

# A thread in these states is leaving: its member carries no new scan.
_LEAVING = (STATE_STOPPING, STATE_STOPPED)


def members_up(config: Config, statuses: Mapping[tuple[str, str], ServiceStatus]) -> list[int]:
    """The tier's members whose every relay thread publishes a live status (``statuses``: an
    aggregator's ``Client.statuses("aggregator")``), ascending."""
    names = {name for (_, name), status in statuses.items() if status.state not in _LEAVING}
    return [member for member in range(len(config.aggregator.hosts))
            if all(f"t{j}" in names for j in member_threads(config, member))]


def member_threads(config: Config, member: int) -> list[int]:
    """Member ``member``'s relay threads j = member x R + r, one per receiver r, ascending."""
    return [relay_thread(member, r, config.n_receivers) for r in range(config.n_receivers)]


def threads_span(threads: list[int]) -> str:
    """A member's relay threads as the status line names them: ``t4-t7``, or ``t4`` for one."""
    first, last = threads[0], threads[-1]
    return f"t{first}-t{last}" if last > first else f"t{first}"


def down_reason(config: Config, member: int) -> str:
    """Why a member counts as down and what that costs, in the words of the status line (the
    dashboard's tier card says the same)."""
    return f"no live status of {threads_span(member_threads(config, member))}: the next scan goes without it"


def scan_tier(config: Config, statuses: Mapping[tuple[str, str], ServiceStatus]) -> list[int]:
    """The members a scan requested now goes through: those up; every member when none is (the
    producers' sends then time out and they spill, as with one aggregator down). [] for a tier of
    one: the scan's records stay as before the tier."""
    if len(config.aggregator.hosts) == 1:
        return []
    return members_up(config, statuses) or list(range(len(config.aggregator.hosts)))


def describe(config: Config, statuses: Mapping[tuple[str, str], ServiceStatus]) -> str:
    """One line for ``sectorflow status``: each member up or down and what it relayed ("" without a
    tier), e.g. ``aggregation tier of 3: member 0 up (t0-t3, 1.2 GB), member 1 DOWN (no status of
    t4-t7: the next scan goes without it), member 2 up (t8-t11, 1.2 GB)``."""
    members = len(config.aggregator.hosts)
    if members == 1:
        return ""
    up = set(members_up(config, statuses))
    relayed = {name: status.bytes for (_, name), status in statuses.items()}
    parts = []
    for member in range(members):
        threads = member_threads(config, member)
        if member in up:
            total = sum(relayed.get(f"t{j}", 0) for j in threads)
            parts.append(f"member {member} up ({threads_span(threads)}, {total / 1e9:.2f} GB relayed)")
        else:
            parts.append(f"member {member} DOWN ({down_reason(config, member)})")
    return f"aggregation tier of {members}: " + ", ".join(parts)
