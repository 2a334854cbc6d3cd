"""Wait until a started stack is ready: every service has announced itself in the kvstore."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.protocol import SERVICE_AGGREGATOR, SERVICE_PRODUCER
from sectorflow.waiting import WaitTimeout, every, wait_until

log = logging.getLogger(__name__)

POLL_S = 0.1  # how often the replica is looked at
PROGRESS_S = 2.0  # how often a progress line is logged


@dataclass(frozen=True)
class Expected:
    """What a ready stack shows in the kvstore."""

    producers: frozenset[str]  # status names r<R>t<T>
    aggregator_threads: frozenset[str]  # status names t<j>, every relay thread of the tier
    nodegroups: int

    @classmethod
    def of(cls, config: Config, nodegroups: int) -> "Expected":
        producers = frozenset(f"r{r}t{t}" for r, receiver in enumerate(config.receivers)
                              for t in range(receiver.threads))
        relays = len(config.aggregator.hosts) * config.n_receivers
        return cls(producers, frozenset(f"t{j}" for j in range(relays)), nodegroups)


def missing(client: Client, expected: Expected) -> list[str]:
    """What the stack still lacks, as words for a progress line; empty when ready."""
    producers = {name for _, name in client.statuses(SERVICE_PRODUCER)}
    aggregator = {name for _, name in client.statuses(SERVICE_AGGREGATOR)}
    groups = len(client.nodegroups())
    lacking = []
    if not client.synced():
        lacking.append("kvstore")
    if expected.producers - producers:
        lacking.append(f"producers {sorted(expected.producers - producers)}")
    if expected.aggregator_threads - aggregator:
        lacking.append(f"aggregator threads {sorted(expected.aggregator_threads - aggregator)}")
    if groups < expected.nodegroups:
        lacking.append(f"NodeGroups ({groups} of {expected.nodegroups} registered)")
    return lacking


def sectors_sent(client: Client, scan: int) -> int:
    """Sectors of ``scan`` the producer threads report sent so far (their statuses; spilled ones
    not included)."""
    return sum(status.messages for status in client.statuses(SERVICE_PRODUCER).values() if status.scan == scan)


def wait_ready(client: Client, expected: Expected, timeout_s: float, check: Callable[[], None]) -> None:
    """Block until ``missing`` is empty; ``check`` raises if a service died meanwhile.

    Raises SectorflowError naming what is still missing after ``timeout_s``.
    """
    lacking: list[str] = []

    def ready() -> bool:
        lacking[:] = missing(client, expected)
        return not lacking

    report = every(PROGRESS_S, lambda _elapsed_s: log.info("waiting for %s", ", ".join(lacking)))

    def on_poll(elapsed_s: float) -> None:
        check()
        report(elapsed_s)

    try:
        wait_until(ready, timeout_s, "the stack", POLL_S, on_poll=on_poll)
    except WaitTimeout:
        raise SectorflowError(f"the stack was not ready after {timeout_s:.0f} s: waiting for {', '.join(lacking)}") \
            from None
