"""The netlab's aggregator hosts (the aggregation tier's): each its own address and namespace, its link
capped by tbf in both directions when asked, and cut off and healed as a failed port would be."""

from __future__ import annotations

import subprocess
import sys

import harness.netlab.probe
import pytest
from harness.netlab import NetlabError, Topology
from support import Processes, wait_until

PORT = 7002
PROBE = [sys.executable, harness.netlab.probe.__file__]
RATE_MBIT = 80


def _qdiscs(namespace: str, device: str) -> str:
    return subprocess.run(["tc", "-n", namespace, "qdisc", "show", "dev", device], capture_output=True, text=True,
                          check=True).stdout


def _carrier(namespace: str) -> bool:
    done = subprocess.run(["ip", "-n", namespace, "link", "show", "eth0"], capture_output=True, text=True, check=True)
    return "NO-CARRIER" not in done.stdout


def _connects(net: Topology, source: str, target: str) -> bool:
    done = subprocess.run(net.command(source, [*PROBE, "tcp-connect", net.address(target), str(PORT)]),
                          capture_output=True, text=True, timeout=60)
    return done.returncode == 0


def test_each_aggregator_host_has_its_address_a_capped_link_both_ways_and_a_cut_that_heals(
        processes: Processes) -> None:
    with Topology(aggregators=3, aggregator_rate_mbit=RATE_MBIT) as net:
        assert net.aggregator_roles == ("agg", "agg2", "agg3") and "agg4" not in net.hosts
        assert [net.address(role) for role in net.aggregator_roles] == ["10.77.1.20", "10.77.1.21", "10.77.1.22"]
        for role in net.aggregator_roles:
            for namespace, device in ((net.hosts[role].namespace, "eth0"), (net.wan_a, f"v-{role}")):
                shaping = _qdiscs(namespace, device)
                assert "tbf" in shaping and f"rate {RATE_MBIT}Mbit" in shaping, (role, device, shaping)
        assert "tbf" not in _qdiscs(net.hosts["recv1"].namespace, "eth0")

        listener = processes.start(*net.command("agg2", [*PROBE, "tcp-listen", net.address("agg2"), str(PORT)]),
                                   name="listen")
        wait_until(lambda: "listening" in processes.output(listener), 20, "the TCP listener on agg2")
        assert _connects(net, "recv1", "agg2")
        net.cut_host("agg2")
        wait_until(lambda: not _carrier(net.hosts["agg2"].namespace), 20, "agg2's link to go down")
        net.heal_host("agg2")
        wait_until(lambda: _carrier(net.hosts["agg2"].namespace), 20, "agg2's link to come back")
        assert _connects(net, "recv1", "agg2")
        processes.stop(listener)


def test_a_topology_refuses_more_aggregator_hosts_than_it_has() -> None:
    with pytest.raises(NetlabError, match=r"aggregators = 5: the topology has 1 to 4 aggregator hosts"):
        Topology(aggregators=5)
