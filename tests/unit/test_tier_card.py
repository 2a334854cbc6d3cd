"""The dashboard's rows of the aggregation tier's members (sectorflow.dashboard.tier): up and down by
the rule ``sectorflow acquire`` uses, each member's relay threads summed, its slice of the current scan."""

from __future__ import annotations

import tomllib
from typing import Any

from sectorflow.configs import DEFAULT_CONFIG, config_from_dict
from sectorflow.dashboard.tier import tier_members
from sectorflow.protocol import STATE_IDLE, STATE_STREAMING, ServiceStatus


def config(members: int):
    data = tomllib.loads(DEFAULT_CONFIG.read_text())  # four receivers: member m's threads are 4m .. 4m + 3
    if members > 1:
        data["aggregator"]["tier"] = [f"10.0.0.{m + 1}" for m in range(members)]
    return config_from_dict(data)


def statuses(*threads: int, state: str) -> dict[tuple[str, str], ServiceStatus]:
    return {("aggregator", f"t{j}"): ServiceStatus(state=state, scan=2, messages=10, bytes=1000, updated_s=1.0)
            for j in threads}


def rows(found: dict[tuple[str, str], ServiceStatus]) -> list[dict[str, Any]]:
    """The services rows view._services makes of ``found``, with a rate of 5 B/s and 1 message/s each."""
    return [{"service": service, "name": name, "state": s.state, "messages": s.messages, "bytes": s.bytes,
             "bytes_per_s": 5.0, "messages_per_s": 1.0} for (service, name), s in found.items()]


def test_each_member_shows_its_threads_counts_rate_and_slice_and_a_member_down_says_what_it_costs() -> None:
    # Member 0 streams, member 2 is idle, member 1 published nothing: down. Scan 2 went through 0 and 2.
    found = {**statuses(0, 1, 2, 3, state=STATE_STREAMING), **statuses(8, 9, 10, 11, state=STATE_IDLE)}
    members = tier_members(config(3), found, rows(found), {"scan": 2, "tier": [0, 2]})
    assert [(m["member"], m["host"], m["up"], m["state"]) for m in members] == [
        (0, "10.0.0.1", True, "streaming"), (1, "10.0.0.2", False, "down"), (2, "10.0.0.3", True, "idle")]
    assert members[0]["threads"] == ["t0", "t1", "t2", "t3"] and members[1]["threads_span"] == "t4-t7"
    assert [(m["messages"], m["bytes"], m["bytes_per_s"], m["messages_per_s"]) for m in members] == [
        (40, 4000, 20.0, 4.0), (0, 0, 0, 0), (40, 4000, 20.0, 4.0)]
    assert [m["share"] for m in members] == [0.5, 0.0, 0.5] and {m["scan"] for m in members} == {2}
    assert [m["note"] for m in members] == [
        "", "no live status of t4-t7: the next scan goes without it", ""]


def test_no_rows_for_a_tier_of_one_and_no_slice_before_a_scan_with_a_tier_list() -> None:
    found = statuses(0, 1, 2, 3, state=STATE_IDLE)
    assert tier_members(config(1), found, rows(found), {"scan": 1, "tier": []}) == []
    found = statuses(*range(8), state=STATE_IDLE)
    assert [m["share"] for m in tier_members(config(2), found, rows(found), None)] == [None, None]
    assert [m["share"] for m in tier_members(config(2), found, rows(found), {"scan": 1, "tier": []})] == [None, None]


def test_a_member_whose_lease_the_standby_took_says_who_relays_its_slice() -> None:
    found = statuses(*range(12), state=STATE_IDLE)
    found[("aggregator", "active-1")] = ServiceStatus(state=STATE_IDLE, scan=0, messages=0, bytes=0, updated_s=1.0,
                                                      extra={"host": "spare", "pid": 9, "takeovers": 1,
                                                             "took_over_from": "agg-1 pid 5"})
    found[("aggregator", "active-2")] = ServiceStatus(state=STATE_IDLE, scan=0, messages=0, bytes=0, updated_s=1.0,
                                                      extra={"host": "agg-2", "pid": 6, "takeovers": 0})
    members = tier_members(config(3), found, rows(found), {"scan": 3, "tier": [0, 1, 2]})
    assert [m["note"] for m in members] == ["", "relayed by the standby spare pid 9 (took over from agg-1 pid 5)", ""]
