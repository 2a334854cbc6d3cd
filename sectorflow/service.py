"""What every sectorflow daemon does the same way: a named state logged at each transition, and a
stop request from SIGTERM or SIGINT (systemd, Slurm and Ctrl-C) that the main loop waits on."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ServiceState:
    """The daemon's named state (starting, serving, stopping, ...), logged at every transition."""

    def __init__(self, logger: logging.Logger, initial: str = "starting") -> None:
        self._logger = logger
        self.state = initial
        logger.info("state %s", initial)

    def enter(self, state: str) -> None:
        self._logger.info("state %s -> %s", self.state, state)
        self.state = state


@contextmanager
def stop_on_signals(logger: logging.Logger, on_stop: Callable[[], None] | None = None) -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT while the block runs (``on_stop`` is called too); the
    previous handlers come back on exit, so a test or a caller embedding the daemon keeps its own."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logger.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()
        if on_stop is not None:
            on_stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["STOP_SIGNALS", "ServiceState", "stop_on_signals"]
