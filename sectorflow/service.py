"""What every sectorflow daemon does the same way: one state machine, logged and published at each
transition, and a stop request from SIGTERM or SIGINT (systemd, Slurm and Ctrl-C) that the main
loop waits on.

The states and the transitions allowed between them are defined once, in C++
(``protocol/include/sectorflow/protocol/service_state.hpp``, kvstore/SPEC.md "Service states"),
and reach Python through ``sectorflow.protocol``: ``SERVICE_STATES``, ``STATE_*`` and
``transition_allowed``. C++ components publish the same states (a producer thread, an aggregator
thread, the kvstore server).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from sectorflow.protocol import SERVICE_STATES, STATE_STARTING, transition_allowed

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ServiceState:
    """A service's state: starts in ``starting``; every transition is checked against the one
    state machine, logged, and handed to ``publish`` (which writes the service's kvstore status).

    :param logger: where transitions are logged ("state a -> b").
    :param publish: called with the new state after each transition (and with the first one).
    :param name: who changes state, in the log line (e.g. "nodegroup ng-1"); "" for the process.
    """

    def __init__(self, logger: logging.Logger, publish: Callable[[str], None] | None = None, name: str = "") -> None:
        self._logger = logger
        self._publish = publish
        self._prefix = f"{name}: " if name else ""
        self.state = STATE_STARTING
        logger.info("%sstate %s", self._prefix, self.state)
        if publish is not None:
            publish(self.state)

    def enter(self, state: str, why: str = "") -> None:
        """Go to ``state`` (nothing happens if the service is in it already).

        :raises ValueError: ``state`` is not a service state or may not follow the current one (a bug).
        """
        if state == self.state:
            return
        if state not in SERVICE_STATES or not transition_allowed(self.state, state):
            raise ValueError(f"{self._prefix}no transition from state {self.state!r} to {state!r} "
                             f"(protocol/service_state.hpp)")
        self._logger.info("%sstate %s -> %s%s", self._prefix, self.state, state, f" ({why})" if why else "")
        self.state = state
        if self._publish is not None:
            self._publish(state)


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
