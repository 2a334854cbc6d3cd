"""The aggregation tier (protocol/SPEC.md, "The aggregation tier"): k aggregators, frame f
through member f mod k, on real processes (``sectorflow up``, MPI ranks, ``acquire --wait``).

The tier must change where sectors travel, never what is counted: the same scan through one
aggregator and through three gives the same file, event for event and position for position, and
each member of the three carries a third of the sectors.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from beamline import FACILITY_TAKEOVER_S, PAIR_PORTS, Beamline
from harness import free_port_block
from keyring import Keyring
from test_faults import checked, first_scan, reasons_are
from test_standby import held_bound, standby_pids

from sectorflow.aggregator.lease import decode_lease, describe, lease_key
from sectorflow.orchestration.stack import AGGREGATOR_STANDBY

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client
from sectorflow.protocol import scan_prefix
from sectorflow.protocol.scan_parts import records_of
from sectorflow.waiting import wait_until

pytestmark = pytest.mark.mpi

LOOPBACK = "127.0.0.1"
RECEIVERS = 4
TIER = 3
# 1,024 frames: 341 or 342 through each member; paced, about 5 s a scan, for a fault mid-scan.
SHAPE, SIDE, RATE_HZ = "32x32", 32, 200.0
SECTORS = SIDE * SIDE * RECEIVERS
# Fixed thresholds: a sampled threshold depends on which frames reach a NodeGroup first, which the
# tier changes; the events must not.
THRESHOLDS = {"background_threshold": 30.5, "xray_threshold": 2000.0}


# A member's death stalls each producer thread once, at its next sector for that member, for this long.
SEND_TIMEOUT_MS = 2000


def stack(beamline, tier: int, tmp_path: Path, standby: bool = False, **sections) -> Beamline:
    """A local stack whose aggregation tier has ``tier`` members (one: no tier), its own directories;
    ``standby``: a standby aggregator beside the tier, on the facility's lease."""
    base = free_port_block(LOOPBACK, tier * RECEIVERS)
    aggregator = {"base_port": base, "tier": [LOOPBACK] * tier} if tier > 1 else {"base_port": base}
    if standby:
        aggregator.update(standby_host=LOOPBACK, takeover_s=FACILITY_TAKEOVER_S)
    run = tmp_path / f"tier{tier}"
    # With a standby, a member's death must not time the producers' sends out before the standby binds
    # its ports: the default send timeout (10 s) outlasts the lease.
    producer = {"fallback_dir": str(run / "raw")} | ({} if standby else {"send_timeout_ms": SEND_TIMEOUT_MS})
    return beamline(aggregator=aggregator, counting=THRESHOLDS, producer=producer,
                    nodegroup={"output_dir": str(run / "counted")}, **sections)


def scan_records(line: Beamline, scan: int):
    with Client.from_config(line.config, name="tier-test") as client:
        assert client.wait_synced(30.0)
        return records_of(client.subtree(scan_prefix(scan)), scan)


def relayed_per_member(line: Beamline, scan: int, members: list[int]) -> list[int]:
    """The sectors each member forwarded (0 for those not in ``members``), from its relay records
    (relay thread j of member j // R), each complete with nothing lost."""
    records = scan_records(line, scan)
    assert records.request is not None and records.request.tier == members, records.request
    assert sorted(records.relay_threads) == [m * RECEIVERS + r for m in members for r in range(RECEIVERS)]
    per_member = [0] * TIER
    for thread, relay in records.relay_threads.items():
        assert relay.complete and not any(relay.lost.values()) and not relay.dead, (thread, relay.forwarded, relay.lost)
        per_member[thread // RECEIVERS] += sum(relay.forwarded.values())
    return per_member


def members_up(line: Beamline, members: int) -> None:
    """Waits until ``members`` members publish every relay thread's status (what acquire reads)."""
    from sectorflow.aggregator.tier import members_up as up
    with Client.from_config(line.config, name="tier-test") as client:
        assert client.wait_synced(30.0)
        wait_until(lambda: len(up(line.config, client.statuses("aggregator"))) == members, 60.0,
                   f"{members} members of the tier up")


def member_1_killed_in_scan_2(line: Beamline, supervisor):
    """Scan 2 at RATE_HZ with member 1 SIGKILLed once a quarter of its sectors were sent; its outcome."""
    with Client.from_config(line.config, name="tier-test") as client:
        assert client.wait_synced(30.0)
        acquire = line.acquire(2, SHAPE, RATE_HZ)
        line.wait_sent(client, 2, SECTORS // 4)
        line.kill(supervisor.process("aggregator-1").pid)
    return Beamline.finish(acquire)


def test_a_tier_of_three_counts_what_one_aggregator_counts(beamline, tmp_path: Path) -> None:
    results = {}
    for tier in (1, TIER):
        line = stack(beamline, tier, tmp_path)
        line.start()
        result = checked(line, Beamline.finish(line.acquire(1, SHAPE, 0.0)), 1, f"none, {tier} aggregator(s)",
                         SECTORS)
        reasons_are(result)
        assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
        if tier == TIER:
            per_member = relayed_per_member(line, 1, list(range(TIER)))
            assert sum(per_member) == SECTORS, per_member
            for relayed in per_member:
                assert abs(relayed - SECTORS / TIER) <= 0.05 * SECTORS / TIER, per_member
        results[tier] = read_counted_scan(result.path)
        line.stop()

    one, three = results[1], results[TIER]
    assert one.scan_shape == three.scan_shape == (SIDE, SIDE)
    assert len(one.events) == len(three.events) == SIDE * SIDE
    assert len(three.missing_positions) == len(three.incomplete_positions) == 0
    for position, (a, b) in enumerate(zip(one.events, three.events)):
        assert np.array_equal(a, b), f"position {position}: {len(a)} events through one aggregator, {len(b)} through three"
    assert sum(len(events) for events in three.events) > 0


def test_a_member_killed_mid_scan_costs_what_it_held_and_the_next_scans_go_without_it_then_with_it(
        beamline, tmp_path: Path) -> None:
    line = stack(beamline, TIER, tmp_path)
    supervisor = line.start()
    before = first_scan(line)

    # Member 1 killed a quarter into scan 2: the producers spill what goes through it once their
    # sends to it time out; the other two stream on. Exact account, nothing silent.
    result = checked(line, member_1_killed_in_scan_2(line, supervisor), 2, "tier of 3: member 1 killed mid-scan",
                     SECTORS)
    reasons_are(result, r"sent but not relayed \(.*\)", r"forwarded to NodeGroup \S+ but not received")
    assert result.spilled > 0 and result.counted > SECTORS // 2, result.output
    assert {k: v for k, v in line.checksums().items() if k in before} == before

    # Scan 3 goes through the two left, whole.
    members_up(line, TIER - 1)
    result = checked(line, Beamline.finish(line.acquire(3, SHAPE, 0.0)), 3, "tier of 3, member 1 down", SECTORS)
    reasons_are(result)
    assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
    assert sum(relayed_per_member(line, 3, [0, 2])) == SECTORS

    # Member 1 back: scan 4 goes through all three again.
    supervisor.start(replace(supervisor.spec("aggregator-1"), name="aggregator-1-again"))
    members_up(line, TIER)
    result = checked(line, Beamline.finish(line.acquire(4, SHAPE, 0.0)), 4, "tier of 3, member 1 back", SECTORS)
    reasons_are(result)
    assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
    assert sum(relayed_per_member(line, 4, [0, 1, 2])) == SECTORS
    assert {k: v for k, v in line.checksums().items() if k in before} == before


def test_a_secured_tier_s_members_each_prove_their_own_key(beamline, tmp_path: Path) -> None:
    """[security] on: each member holds its own pair (aggregator/member-<i>); the producers and the
    NodeGroups ask each socket's member for its key, and the scan is whole through both."""
    keys = Keyring(tmp_path / "keys").tier(2)
    line = stack(beamline, 2, tmp_path, security={"enabled": True, "key_dir": str(keys)})
    line.start()
    result = checked(line, Beamline.finish(line.acquire(1, SHAPE, 0.0)), 1, "none, a secured tier of 2", SECTORS)
    reasons_are(result)
    assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
    records = scan_records(line, 1)
    assert records.request.tier == [0, 1]
    assert sorted(records.relay_threads) == list(range(2 * RECEIVERS))


def facility(tmp_path: Path) -> dict:
    """What a facility turns on beside the tier: a kvstore pair with a durable log, [security] with each
    member's own key, two threads per receiver and receiver 0 on the detector's native header."""
    first = free_port_block(LOOPBACK, 2 * PAIR_PORTS)
    return {"kvstore": {"servers": [f"{LOOPBACK}:{first}", f"{LOOPBACK}:{first + PAIR_PORTS}"],
                        "log_dir": str(tmp_path / "kvlog")},
            "security": {"enabled": True, "key_dir": str(Keyring(tmp_path / "keys").tier(TIER))},
            "receivers": [{"host": LOOPBACK, "threads": 2, "wire": "native" if receiver == 0 else "sectorflow"}
                          for receiver in range(RECEIVERS)]}


def test_a_member_killed_mid_scan_on_the_facility_stack(beamline, tmp_path: Path) -> None:
    """The tier with what a facility turns on beside it (``facility``), no standby: member 1 killed
    mid-scan: the account exact, the earlier file unchanged; the next scan whole on the two left."""
    line = stack(beamline, TIER, tmp_path, **facility(tmp_path))
    supervisor = line.start()
    before = first_scan(line)
    result = checked(line, member_1_killed_in_scan_2(line, supervisor), 2,
                     "facility tier of 3: member 1 killed mid-scan", SECTORS)
    assert result.counted + result.spilled + result.missing == SECTORS
    assert result.counted > SECTORS // 2, result.output
    assert {k: v for k, v in line.checksums().items() if k in before} == before

    members_up(line, TIER - 1)
    result = checked(line, Beamline.finish(line.acquire(3, SHAPE, 0.0)), 3, "facility tier of 3, member 1 down",
                     SECTORS)
    reasons_are(result)
    assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
    # Every sector relayed, by members 0 and 2 alone, every relay record complete: with two threads and
    # two members, each of receiver 0's native threads sends one member nothing, and that member's relay
    # thread learns it from the thread's producer record (a native stream has no info message to say so).
    assert sum(relayed_per_member(line, 3, [0, 2])) == SECTORS


@pytest.mark.parametrize("facility_on", [False, True], ids=["plain", "facility"])
def test_a_standby_takes_a_killed_member_s_slice_mid_scan(beamline, tmp_path: Path, facility_on: bool) -> None:
    """A tier of three and one standby: member 1 killed mid-scan, the standby takes member 1's lease
    (status/aggregator/active-1), binds member 1's ports, rebuilds the scan from the producers'
    records and relays the rest of member 1's slice: nothing spilled, only what the dead process held
    missing, the earlier file unchanged; the next scan whole through all three slices, member 1's on
    the standby. On the facility's stack too (with [security], the standby proves member 1's key)."""
    line = stack(beamline, TIER, tmp_path, standby=True, **(facility(tmp_path) if facility_on else {}))
    supervisor = line.start()
    member_1, standby = supervisor.process("aggregator-1").pid, supervisor.process(AGGREGATOR_STANDBY).pid
    before = first_scan(line)
    key = lease_key(TIER, 1)
    with Client.from_config(line.config, name="tier-test") as client:
        assert client.wait_synced(30.0)
        wait_until(lambda: standby in standby_pids(client), 60.0, "the standby's registration")
        lease = decode_lease(client.get(key))
        assert lease is not None and lease.extra["pid"] == member_1 and lease.extra["takeovers"] == 0, lease
        # Half the pace of the other tests: the lease takes FACILITY_TAKEOVER_S, and the standby should
        # find most of member 1's slice still to come.
        acquire = line.acquire(2, SHAPE, RATE_HZ / 2)
        line.wait_sent(client, 2, SECTORS // 4)
        line.kill(member_1)
        lease = wait_until(lambda: (record := decode_lease(client.get(key))) is not None
                           and record.extra["pid"] == standby and record, 60.0, "the standby to take member 1's lease")
        assert lease.extra["takeovers"] == 1, lease
        result = checked(line, Beamline.finish(acquire), 2, "tier of 3 + standby: member 1 killed mid-scan", SECTORS)
        assert result.spilled == 0 and result.missing <= held_bound(line.config), (result.missing, result.output)
        reasons_are(result, r"sent but not relayed \(.*\)", r"forwarded to NodeGroup \S+ but not received")
        # The standby relayed member 1's part after the takeover (the dead process wrote no relay record).
        relays = scan_records(line, 2).relay_threads
        taken = sum(sum(relays[j].forwarded.values()) for j in range(RECEIVERS, 2 * RECEIVERS) if j in relays)
        assert taken > 0, sorted(relays)
        text = describe(client.subtree())
        assert f"pid {standby} " in text and "member 1 active" in text and "takeovers 1" in text, text
    assert {k: v for k, v in line.checksums().items() if k in before} == before

    # Member 1 restarted finds its lease held by the standby and waits for it.
    supervisor.start(replace(supervisor.spec("aggregator-1"), name="aggregator-1-again"))
    again = supervisor.process("aggregator-1-again").pid
    with Client.from_config(line.config, name="tier-test") as client:
        assert client.wait_synced(30.0)
        wait_until(lambda: again in standby_pids(client), 60.0, "restarted member 1 waiting for its lease")
        assert decode_lease(client.get(key)).extra["pid"] == standby

    # Scan 3: all three slices again, member 1's through the standby; whole.
    members_up(line, TIER)
    result = checked(line, Beamline.finish(line.acquire(3, SHAPE, 0.0)), 3, "tier of 3, member 1 on the standby",
                     SECTORS)
    reasons_are(result)
    assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
    assert sum(relayed_per_member(line, 3, [0, 1, 2])) == SECTORS
