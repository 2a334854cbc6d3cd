"""One host in a network namespace of its own, for a program that needs a broadcast-capable
interface (EPICS pvAccess searches its channels by UDP broadcast, and loopback has no broadcast):
loopback and a veth pair with both ends inside, 10.77.9.1 and .2 on a /24. Named and swept like
the beamline's namespaces (topology.py); leaving the context kills what runs inside and deletes it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence

from .topology import PREFIX, _remove_namespace, run, sweep_stale

SUBNET = "10.77.9"
BROADCAST = f"{SUBNET}.255"
_sequence = itertools.count()


class OneHost:
    """A namespace with a broadcast-capable interface; a context manager that removes it."""

    def __init__(self, role: str = "host") -> None:
        self.namespace = f"{PREFIX}{os.getpid()}x1{next(_sequence)}-{role}"
        self.address = f"{SUBNET}.1"
        self.broadcast = BROADCAST

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace (``ip netns exec`` execs it: its PID is the program's)."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def __enter__(self) -> OneHost:
        sweep_stale()
        try:
            run(["ip", "netns", "add", self.namespace])
            run(["ip", "-n", self.namespace, "link", "set", "lo", "up"])
            run(["ip", "-n", self.namespace, "link", "add", "v0", "type", "veth", "peer", "name", "v1"])
            for device, host in (("v0", 1), ("v1", 2)):
                run(["ip", "-n", self.namespace, "addr", "add", f"{SUBNET}.{host}/24", "brd", "+", "dev", device])
                run(["ip", "-n", self.namespace, "link", "set", device, "up"])
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        _remove_namespace(self.namespace)
