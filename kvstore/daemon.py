"""The kvstore server as a daemon: serve until SIGTERM or SIGINT, log what it did.

The C++ server loop runs in a worker thread with the GIL released; the main thread waits for a
signal (Python runs signal handlers only there), reports rejected messages as they are counted
and stops the server. States, logged on every transition: starting, serving, stopping, stopped.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from sectorflow._core.kvstore import KvstoreError, Server
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError

from .options import server_options

logger = logging.getLogger(__name__)

# How often the main thread looks at the server's counters (seconds).
REPORT_INTERVAL_S = 1.0


class _StateLog:
    """The daemon's named state, logged at every transition."""

    def __init__(self) -> None:
        self.state = "starting"
        logger.info("state %s", self.state)

    def enter(self, state: str) -> None:
        logger.info("state %s -> %s", self.state, state)
        self.state = state


def run_server(config: Config) -> int:
    """Run the kvstore server of ``config`` until SIGTERM or SIGINT; returns the exit code 0.

    Raises:
        SectorflowError: a port cannot be bound (the message names the address) or the server
            loop failed.
    """
    state = _StateLog()
    options = server_options(config)
    try:
        server = Server(options)
    except KvstoreError as error:
        raise SectorflowError(f"{error}; ports are set by [kvstore] port in {config.source}") from None

    stop = threading.Event()
    failures: list[BaseException] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logger.info("received %s", signal.Signals(signum).name)
        stop.set()

    def serve() -> None:
        try:
            server.run()
        except BaseException as error:  # reported by the main thread, once
            failures.append(error)
        finally:
            stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    worker = threading.Thread(target=serve, name="kvstore-server")
    try:
        worker.start()
        state.enter("serving")
        logger.info(
            "snapshots on %s, updates published on %s, updates collected on %s, heartbeat %d ms",
            server.endpoint(0), server.endpoint(1), server.endpoint(2), options.heartbeat_ms,
        )
        reported = 0
        while not stop.wait(REPORT_INTERVAL_S):
            reported = _report_malformed(server, reported)
        _report_malformed(server, reported)
        state.enter("stopping")
    finally:
        server.stop()
        worker.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    stats = server.stats()
    state.enter("stopped")
    logger.info(
        "served %d updates, %d snapshots, %d expirations; rejected %d malformed messages; %d keys at sequence %d",
        stats.updates, stats.snapshots, stats.expired, stats.malformed, stats.keys, stats.sequence,
    )
    if failures:
        raise SectorflowError(f"kvstore server on {server.endpoint(0)} failed: {failures[0]}")
    return 0


def _report_malformed(server: Server, reported: int) -> int:
    """Log the messages rejected since the last report; returns the count reported so far."""
    stats = server.stats()
    if stats.malformed > reported:
        logger.warning(
            "rejected %d malformed message(s), %d in all; last: %s",
            stats.malformed - reported, stats.malformed, stats.last_malformed,
        )
    return stats.malformed
