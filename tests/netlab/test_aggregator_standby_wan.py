"""The active aggregator killed mid-scan with a standby on another host, across the WAN topology
(aggregator on agg, the standby on recv4, NodeGroups behind a 10 ms round trip): the producers,
connected to both addresses with ZMQ_IMMEDIATE, reach the standby once it holds the lease and binds;
it connects to the NodeGroups across the WAN and relays the rest of the scan. The account adds up as
the fault suite defines, and what is missing is no more than the dead process could hold.

``pytest tests/netlab/test_aggregator_standby_wan.py -s`` prints the fault table's row.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from harness.netlab import Topology
from harness.netlab.stack import NetlabStack, netlab_config
from netlab_beamline import accounted, finish
from support import Processes
from test_standby import held_bound, standby_relayed

from sectorflow.orchestration.stack import AGGREGATOR_STANDBY
from sectorflow.waiting import wait_until

pytestmark = pytest.mark.mpi

SHAPE, SECTORS = "16x16", 16 * 16 * 4
ONE_WAY_MS = 5.0
STANDBY_ROLE = "recv4"
WAIT_S = 60.0


def test_the_active_aggregator_killed_mid_scan_the_standby_on_another_host_relays_the_rest_across_the_wan(
        processes: Processes, tmp_path: Path) -> None:
    # Each aggregator binds its own host's address: 0.0.0.0 in one configuration for both.
    # The shortest lease that a kvstore failover cannot interrupt on netlab's 500 ms heartbeat.
    config, path = netlab_config(tmp_path, aggregator={"standby_host": f"{STANDBY_ROLE}.netlab", "bind_host": "0.0.0.0",
                                                       "takeover_s": 4.0},
                                 nodegroup={"scan_timeout_s": 20.0})
    with Topology(delay_ms=ONE_WAY_MS) as net:
        stack = NetlabStack(net, config, path, processes.supervisor)
        try:
            stack.start()
            stack.start_service(STANDBY_ROLE, AGGREGATOR_STANDBY, "aggregator", "--standby")
            stack.start_nodegroups()
            wait_until(lambda: "standby: recv4" in stack.status(), WAIT_S, "the standby's registration on recv4")
            assert "aggregator: active agg" in stack.status()

            acquire = stack.acquire(1, SHAPE, 100.0)  # about 2.6 s: struck a quarter in
            stack.await_sent(1, SECTORS // 4)
            os.kill(processes.supervisor.process("aggregator").pid, signal.SIGKILL)
            outcome = accounted(stack, finish(stack, acquire), 1, SECTORS,
                                "active aggregator killed mid-scan, the standby on another host (WAN)")
            assert outcome.missing <= held_bound(config), (outcome.missing, held_bound(config), outcome.output)
            assert standby_relayed(outcome.output) > 0, outcome.output
            assert outcome.exit_code == (0 if outcome.outcome == "complete" else 1), outcome.output
            status = stack.status()
            assert "aggregator: active recv4" in status and "takeovers 1" in status, status
        finally:
            stack.stop()
