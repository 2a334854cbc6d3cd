"""The active aggregator dies mid-scan with a standby running ([aggregator] standby_host): the standby
takes the kvstore's lease, binds, rebuilds the scan from the producers' records and relays the rest;
the account adds up, its missing sectors no more than the dead process's queues could hold, and the old
aggregator, restarted, waits as the standby.

``pytest tests/faults/test_standby.py -s`` prints the fault table's row.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from beamline import FACILITY_TAKEOVER_S, RANKS, Beamline
from test_faults import SECTORS, checked, first_scan, mid_scan, reasons_are

from sectorflow.aggregator.lease import LEASE_KEY, STANDBY_PREFIX, decode_lease, describe
from sectorflow.configs import Config
from sectorflow.kvstore import Client
from sectorflow.orchestration.stack import AGGREGATOR_STANDBY
from sectorflow.protocol import SERVICE_AGGREGATOR, ServiceStatus
from sectorflow.waiting import wait_until

pytestmark = pytest.mark.mpi

WAIT_S = 60.0


def held_bound(config: Config) -> int:
    """What one aggregator process can hold of a scan when it dies, in sectors: per receiver, its
    producer threads' send queues (ZeroMQ's high-water mark on the pipe to it: the pipe dies with the
    connection), its PULL socket's queue and its queue to each NodeGroup."""
    nodegroups = RANKS * config.nodegroup.groups_per_rank
    hwm = config.aggregator.hwm
    return sum(receiver.threads * config.producer.send_hwm + hwm * (1 + nodegroups) for receiver in config.receivers)


def standby_relayed(output: str) -> int:
    """The sectors the NodeGroups received of the relay's recorded runs, from the account's notes:
    the standby's runs once it took over (the dead process wrote no record). A port that heard both
    processes has a note naming the standby's run as the relay's."""
    return sum(int(received) for received in re.findall(r"\(the relay's\): (\d+) received", output))


def lease_of(client: Client) -> ServiceStatus | None:
    return decode_lease(client.get(LEASE_KEY))


def standby_pids(client: Client) -> set[int]:
    return {int(status.extra["pid"]) for (_, name), status in client.statuses(SERVICE_AGGREGATOR).items()
            if name.startswith(STANDBY_PREFIX)}


def test_the_active_aggregator_killed_mid_scan_the_standby_takes_over(beamline) -> None:
    line = beamline(aggregator={"standby_host": "127.0.0.1", "takeover_s": FACILITY_TAKEOVER_S})
    supervisor = line.start()
    active, standby = supervisor.process("aggregator").pid, supervisor.process(AGGREGATOR_STANDBY).pid
    with Client.from_config(line.config, name="fault-test") as client:
        client.wait_synced(10.0)
        wait_until(lambda: standby in standby_pids(client), WAIT_S, "the standby's registration")
        lease = lease_of(client)
        assert lease is not None and lease.extra["pid"] == active and lease.extra["takeovers"] == 0, lease
    before = first_scan(line)
    acquire = mid_scan(line, lambda _: line.kill(active))
    with Client.from_config(line.config, name="fault-test") as client:
        client.wait_synced(10.0)

        def taken_over() -> ServiceStatus | None:
            lease = lease_of(client)
            return lease if lease is not None and lease.extra["pid"] == standby else None

        lease = wait_until(taken_over, WAIT_S, "the standby to take the lease")
        assert lease is not None and lease.extra["takeovers"] == 1, lease
        result = checked(line, Beamline.finish(acquire), 2, "active aggregator killed mid-scan, standby takes over")
        # Only what the dead process held is missing; the standby relayed the rest of the scan.
        assert result.missing <= held_bound(line.config), (result.missing, held_bound(line.config), result.output)
        # How much of the scan is left for the standby depends on how soon the producers' pipes to
        # the dead process close (until then what they send goes into them): some, not a share.
        assert standby_relayed(result.output) > 0, result.output
        assert result.exit_code == (0 if result.outcome == "complete" else 1), result.output
        reasons_are(result, r"sent but not relayed \(not in aggregator thread \d+'s record: in flight when it stopped "
                            r"or restarted, or the scan closed unfinished there\)")
        assert {k: v for k, v in line.checksums().items() if k in before} == before
        # The old aggregator, restarted, finds the lease held and waits as the standby.
        supervisor.start(replace(supervisor.spec("aggregator"), name="aggregator-again"))
        again = supervisor.process("aggregator-again").pid
        wait_until(lambda: again in standby_pids(client), WAIT_S, "the restarted aggregator's standby registration")
        assert lease_of(client) is not None and lease_of(client).extra["pid"] == standby
        text = describe(client.subtree())
        assert f"pid {standby} " in text and "takeovers 1" in text and f"-{again}" in text, text
    # The stack goes on with the standby active: the next scan is whole.
    after = checked(line, Beamline.finish(line.acquire(3, "8x8", 0.0)), 3, "next scan after the takeover", 256)
    assert (after.outcome, after.exit_code, after.counted) == ("complete", 0, 256), after.output
