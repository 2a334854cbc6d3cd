"""Free TCP ports for services that tests and benchmarks start side by side on one machine."""

from __future__ import annotations

import socket


def free_port(host: str) -> int:
    """A TCP port on ``host`` that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def free_port_block(host: str, count: int, attempts: int = 200) -> int:
    """The first of ``count`` consecutive TCP ports on ``host`` that were all free a moment ago.

    The kvstore needs three consecutive ports and the aggregator one per receiver, so harnesses
    that start services side by side take a block. Raises RuntimeError after ``attempts`` tries.
    """
    for _ in range(attempts):
        base = free_port(host)
        if base + count > 65535:
            continue
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                held.append(socket.socket())
                held[-1].bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports on {host} after {attempts} attempts")
