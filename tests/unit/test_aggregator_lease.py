"""The status line of the aggregators of a stack with a standby (sectorflow.aggregator.lease.describe)."""

from __future__ import annotations

from sectorflow.aggregator.lease import LEASE_KEY, describe, lease_key, lease_member
from sectorflow.protocol import ServiceStatus, status_key


def status(**extra: int | str | float) -> bytes:
    return ServiceStatus(state="idle", scan=0, messages=0, bytes=0, extra=extra).encode()


def test_no_lease_and_no_standby_is_no_line() -> None:
    assert describe({status_key("aggregator", "t0"): status(host="a", pid=1)}) == ""


def test_the_active_its_takeovers_and_the_standbys() -> None:
    entries = {
        LEASE_KEY: status(holder="b:7:x", host="b", pid=7, since_s=0.0, takeovers=2, took_over_from="a pid 5"),
        status_key("aggregator", "standby-a-9"): status(host="a", pid=9, standby=1),
    }
    text = describe(entries)
    assert text.startswith("aggregator: active b pid 7 since ")
    assert "takeovers 2 (took over from a pid 5); standby: a-9" in text


def test_a_free_lease_says_a_standby_takes_it() -> None:
    text = describe({status_key("aggregator", "standby-a-9"): status(host="a", pid=9)})
    assert text == "aggregator: none active (the lease is free: a standby takes it); standby: a-9"


def test_a_lease_that_does_not_decode_counts_as_free() -> None:
    assert describe({LEASE_KEY: b"\x01", status_key("aggregator", "standby-a-9"): status()}).startswith(
        "aggregator: none active")


def test_a_tier_s_members_each_hold_their_own_lease() -> None:
    assert lease_key(1, 0) == LEASE_KEY and lease_key(3, 2) == LEASE_KEY + "-2"
    assert [lease_member(name) for name in ("active", "active-2", "active-x", "t4", "standby-a-9")] == [
        0, 2, None, None, None]
    entries = {
        lease_key(3, 0): status(holder="a:1:x", host="a", pid=1, since_s=0.0, takeovers=0),
        lease_key(3, 1): status(holder="s:9:y", host="s", pid=9, since_s=0.0, takeovers=1, took_over_from="b pid 2"),
        lease_key(3, 2): status(holder="c:3:z", host="c", pid=3, since_s=0.0, takeovers=0),
        status_key("aggregator", "t4"): status(host="s", pid=9),
    }
    text = describe(entries)
    assert text.startswith("aggregators: member 0 active a pid 1 since "), text
    assert "; member 1 active s pid 9 since " in text and "takeovers 1 (took over from b pid 2); member 2" in text
    assert text.endswith("; no standby"), text
