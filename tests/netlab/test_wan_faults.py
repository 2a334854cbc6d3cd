"""Faults across hosts, each mid-scan on the beamline in namespaces (10 ms round trip on the WAN),
each accounted exactly as the fault suite defines (counted + spilled + missing = the scan's
sectors, agreeing with the HDF5 file and the raw files): the WAN down for a while, 0.1% loss on
it, a compute node removed. The delay line's counters show the fault really struck."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from harness.netlab import Topology
from harness.netlab.stack import NetlabStack, netlab_config
from netlab_beamline import accounted, finish
from support import Processes

from sectorflow.errors import SectorflowError

pytestmark = pytest.mark.mpi

SHAPE, SECTORS = "16x16", 16 * 16 * 4
ONE_WAY_MS = 5.0


@contextmanager
def beamline(processes: Processes, tmp_path: Path, **topology: float) -> Iterator[tuple[Topology, NetlabStack]]:
    config, path = netlab_config(tmp_path, nodegroup={"scan_timeout_s": 20.0})
    with Topology(delay_ms=ONE_WAY_MS, **topology) as net:
        stack = NetlabStack(net, config, path, processes.supervisor)
        try:
            stack.start()
            stack.start_nodegroups()
            yield net, stack
        finally:
            stack.stop()


def test_the_wan_down_mid_scan_then_back(processes: Processes, tmp_path: Path) -> None:
    with beamline(processes, tmp_path) as (net, stack):
        acquire = stack.acquire(1, SHAPE, 50.0)  # about 5 s: the link is down for half of it
        stack.await_sent(1, SECTORS // 4)
        net.link_down()
        stack.await_sent(1, 3 * SECTORS // 4)
        net.link_up()
        outcome = accounted(stack, finish(stack, acquire), 1, SECTORS, "the WAN down mid-scan, then up")
        assert (outcome.exit_code == 0) == (outcome.outcome == "complete"), outcome.output
    assert net.link_counters is not None
    assert net.link_counters.a_to_b.dropped_down > 0


def test_loss_on_the_wan_is_repaired_by_tcp_and_the_scan_is_complete(processes: Processes, tmp_path: Path) -> None:
    with beamline(processes, tmp_path, loss=0.001, seed=3) as (net, stack):
        outcome = accounted(stack, finish(stack, stack.acquire(1, SHAPE)), 1, SECTORS, "0.1% loss on the WAN")
        assert (outcome.outcome, outcome.exit_code, outcome.counted) == ("complete", 0, SECTORS), outcome.output
    assert net.link_counters is not None
    assert net.link_counters.a_to_b.dropped_loss > 0


def test_a_compute_node_removed_mid_scan(processes: Processes, tmp_path: Path) -> None:
    with beamline(processes, tmp_path) as (net, stack):
        acquire = stack.acquire(1, SHAPE, 100.0)
        stack.await_sent(1, SECTORS // 4)
        net.remove_host("compute2")  # its rank and everything else on it killed, its links gone
        outcome = accounted(stack, finish(stack, acquire), 1, SECTORS, "a compute node removed mid-scan")
        assert outcome.exit_code != 0 and outcome.outcome != "complete", outcome.output
        assert outcome.counted < SECTORS, outcome.output


def test_a_service_that_exits_before_the_stack_is_ready_ends_the_wait_with_its_log(processes: Processes,
                                                                                    tmp_path: Path) -> None:
    config, path = netlab_config(tmp_path)
    with Topology(delay_ms=ONE_WAY_MS) as net:
        stack = NetlabStack(net, config, path, processes.supervisor)
        try:
            stack.start()
            # A NodeGroup job that cannot start: the wait names it at once rather than waiting out
            # its deadline for a registration that will never come.
            with pytest.raises(SectorflowError, match="nodegroups exited with code") as refused:
                stack.start_nodegroups(("compute1",), "--no-such-option")
            assert "--no-such-option" in str(refused.value)
        finally:
            stack.stop()
