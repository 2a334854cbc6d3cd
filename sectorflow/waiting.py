"""Waiting on a condition with a deadline, for the harnesses that drive real processes (tests,
benchmarks): poll, return the first true value, or fail naming what was awaited. Nothing here
sleeps to synchronise; the sleep is the polling period of a condition checked against a clock.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """The condition did not hold before the deadline; the message names it."""


def wait_until(condition: Callable[[], T], timeout_s: float, what: str, period_s: float = 0.02) -> T:
    """Poll ``condition()`` until it returns something true; returns that value.

    Raises WaitTimeout ("timed out after T s waiting for WHAT") once ``timeout_s`` has passed.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(period_s)  # the polling period of a deadline wait


def free_port_block(host: str, count: int, attempts: int = 200) -> int:
    """The first of ``count`` consecutive TCP ports on ``host`` that were all free a moment ago.

    The kvstore needs three consecutive ports and the aggregator one per receiver, so harnesses
    that start services side by side take a block. Raises RuntimeError after ``attempts`` tries.
    """
    for _ in range(attempts):
        with socket.socket() as probe:
            probe.bind((host, 0))
            base = probe.getsockname()[1]
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
