"""harness/netlab/one_host.py: a namespace whose interface carries a UDP broadcast (what EPICS
pvAccess needs to find its channels, and loopback cannot do), gone afterwards."""

from __future__ import annotations

import subprocess
import sys

from harness.netlab.one_host import OneHost

# Sends a datagram to the broadcast address and reads it back on a socket bound to every address.
BROADCAST_ECHO = """
import socket, sys
listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
listener.bind(("0.0.0.0", 0))
listener.settimeout(10)
sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sender.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
sender.sendto(b"search", (sys.argv[1], listener.getsockname()[1]))
print(listener.recvfrom(64)[0].decode())
"""


def test_a_namespace_whose_interface_carries_a_broadcast_and_that_leaves_nothing_behind() -> None:
    with OneHost("probe") as host:
        addresses = subprocess.run(["ip", "-n", host.namespace, "-o", "-4", "addr"], capture_output=True, text=True,
                                   check=True).stdout
        assert f"inet {host.address}/24 brd {host.broadcast}" in addresses
        echoed = subprocess.run(host.command([sys.executable, "-c", BROADCAST_ECHO, host.broadcast]),
                                capture_output=True, text=True, timeout=30)
        assert echoed.stdout.strip() == "search", echoed.stderr
        namespace = host.namespace
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert namespace not in listed
