"""The aggregation tier's members on the page (protocol/SPEC.md, "The aggregation tier"): per member
its host, up or down, its relay threads, what they relayed, their rate, and its slice of the current
scan.

Up and down is ``sectorflow.aggregator.tier.members_up``, the rule ``sectorflow acquire`` fixes a
scan's members by, so the page never calls a member up that the next scan goes without. The counts
and rates are the relay threads' rows of the services table (``view._services``), summed per member:
the rates come from the same ``Rates`` as every other service's. With a standby beside the tier, a
member whose lease the standby took says so (``status/aggregator/active-<i>``: who holds it, whom
it took over from): its slice is relayed from the standby's host, not the member's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sectorflow._core import protocol as _records
from sectorflow.aggregator.lease import lease_key
from sectorflow.aggregator.tier import down_reason, member_threads, members_up, threads_span
from sectorflow.configs import Config
from sectorflow.protocol import STATE_STREAMING, ServiceStatus

# What a member is doing, for the page: a member down carries nothing whatever its last statuses said.
DOWN, STREAMING, IDLE = "down", "streaming", "idle"
# The counters summed over a member's relay threads.
SUMMED = ("messages", "bytes", "bytes_per_s", "messages_per_s")


def tier_members(config: Config, statuses: Mapping[tuple[str, str], ServiceStatus],
                 services: list[dict[str, Any]], scan: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One row per member of ``[aggregator] tier`` ([] for a tier of one: there is nothing to slice).

    ``statuses``: the aggregators' decoded statuses by ``(service, name)``; ``services``: the page's
    services rows (with their rates); ``scan``: the page's current scan (its ``tier``: the members it
    goes through), None before the first."""
    hosts = config.aggregator.hosts
    if len(hosts) <= 1:
        return []
    up = set(members_up(config, statuses))
    relays = {row["name"]: row for row in services if row["service"] == _records.SERVICE_AGGREGATOR}
    return [_member(config, member, member in up, relays, scan, _taken_over(statuses, len(hosts), member))
            for member in range(len(hosts))]


def _taken_over(statuses: Mapping[tuple[str, str], ServiceStatus], members: int, member: int) -> str:
    """"relayed by the standby ..." when the member's lease was taken over ("" otherwise, or without a standby)."""
    lease = statuses.get((_records.SERVICE_AGGREGATOR, lease_key(members, member).rsplit("/", 1)[1]))
    if lease is None or not lease.extra.get("took_over_from"):
        return ""
    extra = lease.extra
    return (f"relayed by the standby {extra.get('host')} pid {extra.get('pid')} (took over from "
            f"{extra['took_over_from']})")


def _member(config: Config, member: int, up: bool, relays: Mapping[str, dict[str, Any]],
            scan: Mapping[str, Any] | None, taken_over: str) -> dict[str, Any]:
    threads = member_threads(config, member)
    # A dead member's statuses expire with the kvstore's ttl: until then its last counts still show.
    rows = [relays[f"t{j}"] for j in threads if f"t{j}" in relays]
    streaming = any(row["state"] == STATE_STREAMING for row in rows)
    return {
        "member": member,
        "host": config.aggregator.hosts[member],
        "up": up,
        "state": DOWN if not up else STREAMING if streaming else IDLE,
        "threads": [f"t{j}" for j in threads],
        "threads_span": threads_span(threads),
        **{counter: sum(row[counter] for row in rows) for counter in SUMMED},
        "scan": scan["scan"] if scan else None,
        "share": _share(member, scan),
        "note": taken_over if up else down_reason(config, member),
    }


def _share(member: int, scan: Mapping[str, Any] | None) -> float | None:
    """The fraction of ``scan``'s frames through ``member``: frame f goes through ``tier[f mod
    len(tier)]``, so each member of the scan's list carries 1/len of them. None when the scan has no
    tier list (no scan yet, or one requested before the tier)."""
    tier = scan.get("tier") if scan else None
    if not tier:
        return None
    return 1 / len(tier) if member in tier else 0.0
