"""Free TCP ports for services that tests and benchmarks start side by side on one machine.

A port is probed free and bound by a service a moment later. The kernel hands ports of its
ephemeral range (net.ipv4.ip_local_port_range) to every outgoing connection, so a port probed
there can be taken in that moment by any client's connect: a service then fails with "Address
already in use" (it happened in CI under load). The ports given here come from below that range,
where only an explicit bind takes a port, and no port is given twice by one process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 20000  # above the well-known and most registered services' ports
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_low() -> int:
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


class _Allocator:
    """Hands out ports of [_LOWEST, the ephemeral range's start) in turn from a random start, so
    that two processes allocating at once seldom probe the same ports."""

    def __init__(self) -> None:
        self._high = max(_ephemeral_low(), _LOWEST + 1024)
        self._next = random.randrange(_LOWEST, self._high)

    def block(self, host: str, count: int, attempts: int) -> int:
        for _ in range(attempts):
            if self._next + count > self._high:
                self._next = _LOWEST
            base, self._next = self._next, self._next + count
            if all(_bindable(host, port) for port in range(base, base + count)):
                return base
        raise RuntimeError(f"no {count} consecutive free ports on {host} after {attempts} attempts")


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


_allocator = _Allocator()


def free_port(host: str) -> int:
    """A TCP port on ``host`` that was free a moment ago, outside the ephemeral range."""
    return free_port_block(host, 1)


def free_port_block(host: str, count: int, attempts: int = 200) -> int:
    """The first of ``count`` consecutive TCP ports on ``host`` that were all free a moment ago.

    The kvstore needs three consecutive ports and the aggregator one per receiver, so harnesses
    that start services side by side take a block. Raises RuntimeError after ``attempts`` tries.
    """
    return _allocator.block(host, count, attempts)
