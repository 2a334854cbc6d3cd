"""Which members of an aggregation tier carry a scan, and what ``sectorflow status`` says of them
(sectorflow.aggregator.tier; protocol/SPEC.md, "The aggregation tier")."""

from __future__ import annotations

import tomllib

from sectorflow.aggregator.tier import describe, members_up, scan_tier
from sectorflow.configs import DEFAULT_CONFIG, config_from_dict
from sectorflow.protocol import STATE_IDLE, STATE_STOPPING, STATE_STREAMING, ServiceStatus


def config(members: int):
    data = tomllib.loads(DEFAULT_CONFIG.read_text())  # four receivers: member m's threads are 4m .. 4m + 3
    if members > 1:
        data["aggregator"]["tier"] = ["127.0.0.1"] * members
    return config_from_dict(data)


def statuses(*threads: int, state: str = STATE_STREAMING) -> dict[tuple[str, str], ServiceStatus]:
    return {("aggregator", f"t{j}"): ServiceStatus(state=state, scan=1, messages=10, bytes=250_000_000, updated_s=1.0)
            for j in threads}


def test_a_member_is_up_while_every_relay_thread_of_it_publishes_a_live_status() -> None:
    tier = config(3)
    assert members_up(tier, statuses(*range(12))) == [0, 1, 2]
    # Member 1 lacks thread 5; member 2 is stopping: the scan goes through member 0 alone.
    live = {**statuses(0, 1, 2, 3, 4, 6, 7), **statuses(8, 9, 10, 11, state=STATE_STOPPING)}
    assert members_up(tier, live) == [0]
    assert scan_tier(tier, live) == [0]
    # None up: every member (the producers then spill, as with one aggregator down).
    assert scan_tier(tier, {}) == [0, 1, 2]
    # No tier: no list, the scan's records stay as before the tier.
    assert scan_tier(config(1), statuses(0, 1, 2, 3)) == []


def test_status_names_each_member_up_or_down_and_what_it_relayed() -> None:
    assert describe(config(1), statuses(0, 1, 2, 3)) == ""
    line = describe(config(3), {**statuses(*range(4)), **statuses(*range(8, 12), state=STATE_IDLE)})
    assert line == ("aggregation tier of 3: member 0 up (t0-t3, 1.00 GB relayed), member 1 DOWN (no live status of "
                    "t4-t7: the next scan goes without it), member 2 up (t8-t11, 1.00 GB relayed)")
