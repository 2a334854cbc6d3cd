"""Waiting on a condition with a deadline: poll, return the first true value, or fail naming what
was awaited. The one deadline wait of sectorflow: the services and commands that wait for a
replica, a file or a process use it, and so do the tests and benchmarks. The sleep here is the
polling period of a condition checked against a clock, never a synchronisation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sectorflow.errors import SectorflowError

T = TypeVar("T")


class WaitTimeout(SectorflowError, TimeoutError):
    """The condition did not hold before the deadline; the message names it.

    A SectorflowError, so that a command line that runs out of time prints one line.
    """


def wait_until(condition: Callable[[], T], timeout_s: float | None, what: str, period_s: float = 0.02, *,
               on_poll: Callable[[float], object] | None = None, stop: threading.Event | None = None) -> T | None:
    """Poll ``condition()`` every ``period_s`` until it returns something true; returns that value.

    Args:
        condition: what is awaited; it may block for a while itself (then pass ``period_s=0``) and
            may raise to end the wait.
        timeout_s: the deadline, from now; None waits for as long as it takes.
        what: the awaited thing, for the timeout's message.
        on_poll: called with the seconds waited so far after every poll that found the condition
            false: a health check that raises ends the wait with its error; a progress report
            rate-limits itself (see ``every``).
        stop: when set, the wait ends at once and returns None (a service asked to stop).

    Raises:
        WaitTimeout: "timed out after T s waiting for WHAT", once ``timeout_s`` has passed.
    """
    started = time.monotonic()
    while True:
        value = condition()
        if value:
            return value
        elapsed_s = time.monotonic() - started
        if on_poll is not None:
            on_poll(elapsed_s)
        if timeout_s is not None and elapsed_s > timeout_s:
            raise WaitTimeout(f"timed out after {timeout_s:g} s waiting for {what}")
        if stop is None:
            time.sleep(period_s)  # the polling period of a deadline wait
        elif stop.wait(period_s):
            return None


def every(period_s: float, report: Callable[[float], object]) -> Callable[[float], None]:
    """An ``on_poll`` for progress: ``report(elapsed_s)`` on the first poll, then at most once per ``period_s``."""
    due_s = 0.0

    def maybe_report(elapsed_s: float) -> None:
        nonlocal due_s
        if elapsed_s >= due_s:
            report(elapsed_s)
            due_s = elapsed_s + period_s

    return maybe_report


__all__ = ["WaitTimeout", "every", "wait_until"]
