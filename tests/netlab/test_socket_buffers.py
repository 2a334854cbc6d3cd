"""[aggregator] sndbuf_bytes and [nodegroup] rcvbuf_bytes reach the kernel: every connection from
the aggregator host to a compute node has the send buffer asked for, every NodeGroup data
connection the receive buffer (Linux reports twice the size asked: its bookkeeping share)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from harness.netlab import Topology
from harness.netlab.stack import NetlabStack, netlab_config
from netlab_beamline import finish
from support import Processes

pytestmark = pytest.mark.mpi

# Below net.core.wmem_max/rmem_max (4 MiB here), which cap what a socket may ask and which a
# namespace cannot raise on this kernel; above what autotuning starts a connection with.
ASKED = 3 * 1024 * 1024
CONNECTION = re.compile(r"^ESTAB\s+\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+).*?\n\s+skmem:\(([^)]*)\)", re.M)


def buffers(net: Topology, role: str) -> list[tuple[int, str, int, dict[str, int]]]:
    """(local port, peer address, peer port, skmem fields) of each established TCP connection on ``role``."""
    listing = subprocess.run(net.command(role, ["ss", "-tmn"]), capture_output=True, text=True, check=True).stdout
    found = []
    for _, local_port, peer, peer_port, skmem in CONNECTION.findall(listing):
        fields = {re.sub(r"\d+$", "", item): int(re.sub(r"^\D+", "", item)) for item in skmem.split(",")}
        found.append((int(local_port), peer, int(peer_port), fields))
    return found


def test_the_configured_buffers_are_the_kernel_buffers_of_the_wan_hop(processes: Processes, tmp_path: Path) -> None:
    config, path = netlab_config(tmp_path, aggregator={"sndbuf_bytes": ASKED}, nodegroup={"rcvbuf_bytes": ASKED})
    kvstore_ports = set(range(config.kvstore.port, config.kvstore.port + 3))
    with Topology(delay_ms=1.0) as net:
        stack = NetlabStack(net, config, path, processes.supervisor)
        try:
            stack.start()
            stack.start_nodegroups()
            # The aggregator connects to a NodeGroup when a scan first routes to it, and stays connected.
            scan = finish(stack, stack.acquire(1, "2x2"))
            assert scan.outcome == "complete", scan.output
            compute = {net.address(role) for role in ("compute1", "compute2")}
            # The aggregator's connections to the NodeGroups: to a compute node, not from the kvstore's ports.
            sending = [c for c in buffers(net, "agg") if c[1] in compute and c[0] not in kvstore_ports]
            # The NodeGroups' data connections: from the aggregator host, not to the kvstore.
            receiving = [c for role in ("compute1", "compute2") for c in buffers(net, role)
                         if c[1] == net.address("agg") and c[2] not in kvstore_ports]
        finally:
            stack.stop()
    # Each of the 4 aggregator threads connects to each of the 2 NodeGroups.
    assert len(sending) == len(receiving) == config.n_receivers * 2
    assert {c[3]["tb"] for c in sending} == {2 * ASKED}
    assert {c[3]["rb"] for c in receiving} == {2 * ASKED}
