"""Helpers of the producer tests: a small detector, the aggregator's upstream end played by pyzmq
PULL sockets bound on aggregator.base_port + r, and a NodeGroup stand-in for discovery only."""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgpack
import pytest
import zmq
from kvstore_support import KvServer, start_kvstore
from support import STANDIN, Processes, wait_until

from sectorflow.configs import Config
from sectorflow.kvstore import Client

START_S = 20.0
# 4 sectors of 8 x 32 pixels (512 bytes each).
SMALL_DETECTOR = {"frame_rows": 32, "frame_cols": 32, "sector_rows": 8, "sector_cols": 32, "dtype": "uint16"}


def small_receivers(threads: int) -> list[dict]:
    return [{"host": "127.0.0.1", "threads": threads} for _ in range(4)]


def digest(payload: bytes) -> str:
    return hashlib.blake2b(payload, digest_size=16).hexdigest()


@dataclass
class Upstream:
    """PULL sockets bound where aggregator threads listen; collects what producers send."""

    context: zmq.Context
    sockets: list[zmq.Socket]
    infos: list[tuple[int, dict]] = field(default_factory=list)
    data: list[tuple[int, list, bytes]] = field(default_factory=list)

    def drain(self) -> int:
        """Receive what is waiting on every socket; returns how many messages came."""
        got = 0
        for r, pull in enumerate(self.sockets):
            while True:
                try:
                    parts = pull.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                got += 1
                if len(parts) == 1:
                    self.infos.append((r, msgpack.unpackb(parts[0])))
                else:
                    self.data.append((r, msgpack.unpackb(parts[0]), parts[1]))
        return got

    def collect(self, infos: int, data: int, what: str) -> None:
        """Drain until at least ``infos`` info and ``data`` data messages have come."""
        wait_until(lambda: self.drain() >= 0 and len(self.infos) >= infos and len(self.data) >= data, START_S, what)

    def clear(self) -> None:
        self.infos.clear()
        self.data.clear()


@pytest.fixture
def upstream_for() -> Iterator[Callable[..., Upstream]]:
    """``upstream_for(config, rcvhwm=1000)`` binds one PULL per receiver on aggregator.base_port + r."""
    context = zmq.Context()
    made: list[zmq.Socket] = []

    def make(config: Config, rcvhwm: int = 1000) -> Upstream:
        sockets = []
        for r in range(config.n_receivers):
            pull = context.socket(zmq.PULL)
            pull.setsockopt(zmq.RCVHWM, rcvhwm)
            pull.setsockopt(zmq.LINGER, 0)
            pull.bind(f"tcp://127.0.0.1:{config.aggregator.base_port + r}")
            sockets.append(pull)
            made.append(pull)
        return Upstream(context, sockets)

    yield make
    for pull in made:
        pull.close(0)
    context.term()


def start_standin(processes: Processes, path: Path, tmp_path: Path, uid: str) -> None:
    """A registered NodeGroup stand-in (discovery only: producers talk to the aggregator's ports)."""
    out = tmp_path / f"{uid}.jsonl"
    processes.start(sys.executable, str(STANDIN), "--config", str(path), "--uid", uid, "--out", str(out),
                    name=f"standin-{uid}")


def wait_for_nodegroups(client: Client, uids: list[str]) -> None:
    wait_until(lambda: [r.uid for r in client.nodegroups()] == uids, START_S, f"NodeGroups {uids} in the replica")


def stalled(read: Callable[[], int], polls: int = 12) -> Callable[[], bool]:
    """A condition for ``wait_until``: true once ``read()`` gave the same non-zero value on ``polls``
    calls in a row. The spacing of the samples is wait_until's polling; nothing here sleeps."""
    history: list[int] = []

    def condition() -> bool:
        history.append(read())
        recent = history[-polls:]
        return len(recent) == polls and recent[0] > 0 and len(set(recent)) == 1

    return condition


__all__ = ["KvServer", "start_kvstore"]


def run_threads(targets: list) -> list:
    """Run each callable on its own thread (the binding releases the GIL); returns their results."""
    results: list = [None] * len(targets)
    errors: list = []

    def call(i: int) -> None:
        try:
            results[i] = targets[i]()
        except Exception as error:  # reported below, with the thread's index
            errors.append((i, error))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(targets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(START_S)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads), "a producer thread did not finish"
    return results
