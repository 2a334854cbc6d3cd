"""The aggregation tier across hosts (protocol/SPEC.md, "The aggregation tier"): 4 receiver hosts, 3
aggregator hosts (agg, agg2, agg3; the kvstore on agg), 2 compute hosts behind the delay line. A scan is
whole and each member relays about a third of it; one aggregator host's link cut mid-scan leaves an
exact account; the next scan is whole on the two members left.

``pytest tests/netlab/test_aggregation_tier_hosts.py -s`` prints the fault table's rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.netlab import Topology
from harness.netlab.stack import NetlabStack, netlab_config, tier_overrides
from netlab_beamline import accounted, finish
from support import Processes

pytestmark = pytest.mark.mpi

RECEIVERS, TIER = 4, 3
SIDE = 16
SHAPE, SECTORS = f"{SIDE}x{SIDE}", SIDE * SIDE * RECEIVERS
# The sectors of the frames through one member (frame f through member f mod 3), at most.
MEMBER_PART = -(-SIDE * SIDE // TIER) * RECEIVERS
# About 10 s a scan at a pace the delay line carries on a loaded machine: cut a quarter in, the
# producers' sends to the cut member time out well before the scan ends.
RATE_HZ = 25.0
ONE_WAY_MS = 5.0
CUT = "agg2"  # member 1
# A member cut off stalls each producer thread once, at its next sector for it, for this long.
SEND_TIMEOUT_MS = 2000


def relayed_per_member(stack: NetlabStack, scan: int, members: list[int]) -> list[int]:
    """The sectors each member forwarded, from its relay records (relay thread j of member j // R),
    each complete with nothing lost; the scan went through ``members``."""
    records = stack.relayed(scan)
    assert records.pop(-1)["tier"] == members, records
    assert sorted(records) == [m * RECEIVERS + r for m in members for r in range(RECEIVERS)], records
    per_member = [0] * TIER
    for thread, relay in records.items():
        assert relay["complete"] and relay["lost"] == 0 and not relay["dead"], (thread, relay)
        per_member[thread // RECEIVERS] += relay["forwarded"]
    return per_member


def test_a_tier_on_three_hosts_relays_a_third_each_and_a_cut_link_leaves_an_exact_account(
        processes: Processes, tmp_path: Path) -> None:
    with Topology(delay_ms=ONE_WAY_MS, aggregators=TIER) as net:
        config, path = netlab_config(tmp_path, aggregator=tier_overrides(net),
                                     producer={"send_timeout_ms": SEND_TIMEOUT_MS}, nodegroup={"scan_timeout_s": 20.0})
        stack = NetlabStack(net, config, path, processes.supervisor)
        cut = False
        try:
            stack.start()
            stack.start_nodegroups()

            outcome = accounted(stack, finish(stack, stack.acquire(1, SHAPE)), 1, SECTORS, "tier of 3 hosts, none")
            assert (outcome.outcome, outcome.exit_code, outcome.counted) == ("complete", 0, SECTORS), outcome.output
            per_member = relayed_per_member(stack, 1, list(range(TIER)))
            assert sum(per_member) == SECTORS, per_member
            for relayed in per_member:
                assert abs(relayed - SECTORS / TIER) <= 0.05 * SECTORS / TIER, per_member

            # Member 1's host cut off a quarter into scan 2: what was in flight to it and what it held
            # are missing, the rest of its part spilled once the producers' sends to it time out (none
            # when the producers had sent all of it before); the other two stream on, so only member
            # 1's part is lost.
            acquire = stack.acquire(2, SHAPE, RATE_HZ)
            stack.await_sent(2, SECTORS // 4)
            net.cut_host(CUT)
            cut = True
            outcome = accounted(stack, finish(stack, acquire), 2, SECTORS,
                                f"tier of 3 hosts, {CUT}'s link cut mid-scan")
            assert outcome.outcome == "incomplete" and SECTORS - MEMBER_PART <= outcome.counted < SECTORS, \
                outcome.output

            # Member 1 drops out of the tier (its statuses expire); scan 3 goes through the two left, whole.
            stack.await_members(TIER - 1)
            outcome = accounted(stack, finish(stack, stack.acquire(3, SHAPE)), 3, SECTORS,
                                f"tier of 3 hosts, {CUT} still cut off")
            assert (outcome.outcome, outcome.exit_code, outcome.counted) == ("complete", 0, SECTORS), outcome.output
            assert sum(relayed_per_member(stack, 3, [0, 2])) == SECTORS
        finally:
            if cut:  # the producers' sends to the member then drain, and they stop without a kill
                net.heal_host(CUT)
            stack.stop()
