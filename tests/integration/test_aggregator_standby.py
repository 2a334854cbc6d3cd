"""Aggregators of a stack with a standby ([aggregator] standby_host) take turns through the kvstore's
lease status/aggregator/active: real daemons, started together, one holds the lease and relays, the
others wait as standbys; killed, the holder is replaced by exactly one of them; stopped cleanly, it
hands over at once; the lease record counts takeovers and `sectorflow status` shows them."""

from __future__ import annotations

import subprocess
import sys

from kvstore_support import start_kvstore
from support import wait_until

from sectorflow.aggregator.lease import LEASE_KEY, STANDBY_PREFIX, decode_lease
from sectorflow.kvstore import Client
from sectorflow.protocol import SERVICE_AGGREGATOR, ServiceStatus

WAIT_S = 60.0


def lease_of(client: Client) -> ServiceStatus | None:
    return decode_lease(client.get(LEASE_KEY))


def standbys(client: Client) -> set[int]:
    return {int(status.extra["pid"]) for (_, name), status in client.statuses(SERVICE_AGGREGATOR).items()
            if name.startswith(STANDBY_PREFIX)}


def relaying(client: Client) -> set[int]:
    """The pids whose relay threads publish a live status (t<r>)."""
    return {int(status.extra["pid"]) for (_, name), status in client.statuses(SERVICE_AGGREGATOR).items()
            if name.startswith("t") and status.state not in ("stopping", "stopped")}


def test_one_aggregator_holds_the_lease_and_exactly_one_standby_takes_over(make_config, processes) -> None:
    server = start_kvstore(make_config, processes, aggregator={"standby_host": "127.0.0.1", "takeover_s": 1.6})
    args = ("aggregator", "--config", str(server.path))
    daemons = [processes.sectorflow(*args, name="aggregator")]
    daemons += [processes.sectorflow(*args, "--standby", name=f"standby{i}") for i in (1, 2)]
    pids = {daemon.pid: daemon for daemon in daemons}
    with Client.from_config(server.config, name="test") as client:
        def settled(holder_not: set[int]) -> ServiceStatus | None:
            lease = lease_of(client)
            if lease is None or lease.extra["pid"] in holder_not:
                return None
            others = set(pids) - holder_not - {lease.extra["pid"]}
            ready = standbys(client) >= others and relaying(client) == {lease.extra["pid"]}
            return lease if ready else None

        lease = wait_until(lambda: settled(set()), WAIT_S, "one holder relaying and two standbys")
        first = lease.extra["pid"]
        assert first == daemons[0].pid and lease.extra["takeovers"] == 0, lease
        # Killed: its lease expires, one standby takes it, the other stays a standby.
        pids[first].kill()
        pids[first].wait(WAIT_S)
        lease = wait_until(lambda: settled({first}), WAIT_S, "a standby to take over")
        second = lease.extra["pid"]
        assert lease.extra["takeovers"] == 1 and str(first) in lease.extra["took_over_from"], lease
        third = (set(pids) - {first, second}).pop()
        assert third in standbys(client) and relaying(client) == {second}
        # Stopped cleanly, the holder gives the lease up; the last standby takes it.
        processes.stop(pids[second])
        lease = wait_until(lambda: settled({first, second}), WAIT_S, "the last standby to take over")
        assert lease.extra["pid"] == third and lease.extra["takeovers"] == 2, lease
        status = subprocess.run([sys.executable, "-m", "sectorflow", "status", "--config", str(server.path)],
                                capture_output=True, text=True, timeout=WAIT_S)
        assert "aggregator: active " in status.stdout and f"pid {third} " in status.stdout, status.stdout
        assert "takeovers 2" in status.stdout and "no standby" in status.stdout, status.stdout
