"""Waiting on a condition with a deadline, for the harnesses that drive real processes (tests,
benchmarks): poll, return the first true value, or fail naming what was awaited. Nothing here
sleeps to synchronise; the sleep is the polling period of a condition checked against a clock.
"""

from __future__ import annotations

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
