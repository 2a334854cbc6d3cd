"""The facility's failover across hosts: a kvstore pair whose backup runs on another host
than the primary (agg and recv4), a standby aggregator on recv4 too, NodeGroups behind a 10 ms round
trip. The kvstore primary killed mid-scan: every client moves to the backup across the network, the
active aggregator keeps the lease and relays throughout (the scan complete, takeovers 0); then the
active aggregator killed mid-scan: the standby on recv4 takes over once, the account exact.

``pytest tests/netlab/test_facility_failover_hosts.py -s`` prints the fault table's rows.
"""

from __future__ import annotations

import os
import re
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
# About 10 s a scan, at a rate the delay line carries on a loaded machine: struck a quarter in, either
# failover ends well before the scan does.
RATE_HZ = 25.0
ONE_WAY_MS = 5.0
OTHER_HOST = "recv4"
WAIT_S = 60.0
LEASE = re.compile(r"aggregator: active (\S+) pid (\d+) since (\S+), takeovers (\d+)")


def lease_line(stack: NetlabStack) -> tuple[str, str, str, str]:
    """(host, pid, since, takeovers) of the active aggregator, as ``sectorflow status`` says them."""
    found = wait_until(lambda: LEASE.search(stack.status()), WAIT_S, "sectorflow status naming the active aggregator")
    return found.groups()


def test_the_kvstore_backup_and_the_standby_on_another_host_hold_through_both_failovers(
        processes: Processes, tmp_path: Path) -> None:
    port = 5556
    config, path = netlab_config(
        tmp_path, kvstore={"servers": [f"agg.netlab:{port}", f"{OTHER_HOST}.netlab:{port}"], "bind_host": "0.0.0.0",
                           "log_dir": str(tmp_path / "kvlog")},
        # The shortest lease that a kvstore failover cannot interrupt on netlab's 500 ms heartbeat.
        aggregator={"standby_host": f"{OTHER_HOST}.netlab", "bind_host": "0.0.0.0", "takeover_s": 4.0},
        nodegroup={"scan_timeout_s": 20.0})
    with Topology(delay_ms=ONE_WAY_MS) as net:
        stack = NetlabStack(net, config, path, processes.supervisor)
        try:
            stack.start(hosts={"kvstore-backup": OTHER_HOST})
            stack.start_service(OTHER_HOST, AGGREGATOR_STANDBY, "aggregator", "--standby")
            stack.start_nodegroups()
            wait_until(lambda: f"standby: {OTHER_HOST}" in stack.status(), WAIT_S, "the standby's registration")
            before = lease_line(stack)
            assert before[0].split(".")[0] == "agg" and before[3] == "0", before

            acquire = stack.acquire(1, SHAPE, RATE_HZ)
            stack.await_sent(1, SECTORS // 4)
            os.kill(processes.supervisor.process("kvstore-primary").pid, signal.SIGKILL)
            outcome = accounted(stack, finish(stack, acquire), 1, SECTORS,
                                "kvstore primary killed mid-scan, the backup on another host (WAN)")
            assert (outcome.outcome, outcome.exit_code, outcome.counted) == ("complete", 0, SECTORS), outcome.output
            status = stack.status()
            assert "the backup is active" in status, status
            # The same holder since the same moment: the kvstore failover never stopped it.
            assert lease_line(stack) == before

            acquire = stack.acquire(2, SHAPE, RATE_HZ)
            stack.await_sent(2, SECTORS // 4)
            os.kill(processes.supervisor.process("aggregator").pid, signal.SIGKILL)
            outcome = accounted(stack, finish(stack, acquire), 2, SECTORS,
                                "then the active aggregator killed mid-scan, the standby on another host (WAN)")
            assert outcome.missing <= held_bound(config), (outcome.missing, held_bound(config), outcome.output)
            # The standby relayed the rest: its runs reached the NodeGroups, or (nothing held by the
            # dead process at this pace) the scan is whole, three quarters of it sent after the kill.
            assert outcome.outcome == "complete" or standby_relayed(outcome.output) > 0, outcome.output
            host, _, _, takeovers = lease_line(stack)
            assert (host.split(".")[0], takeovers) == (OTHER_HOST, "1"), stack.status()
        finally:
            stack.stop()
