"""Fixtures of the kvstore integration tests: a real `sectorflow kvstore` server process, in-process
clients that are always closed, and a client process that registers itself and waits to be killed.
Import the fixtures into a test module to use them."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import zmq
from support import Processes, wait_until

from sectorflow.configs import Config
from sectorflow.kvstore import Client, client_options
from sectorflow.protocol import ServiceStatus, status_key
from sectorflow.waiting import WaitTimeout
from sectorflow.waiting import wait_until as shared_wait_until

SERVER_START_S = 20.0
SYNC_S = 10.0  # deadline of waits on replication; a failure guard, not a speed requirement

# A service that registers a status with the configured ttl, says so, and waits to be killed.
REGISTERING_SCRIPT = """
import sys, threading
from sectorflow.configs import load_config
from sectorflow.kvstore import Client
from sectorflow.protocol import ServiceStatus, status_key
config = load_config(sys.argv[1])
client = Client.from_config(config, name=sys.argv[2])
client.set(status_key("producer", sys.argv[2]), ServiceStatus(state="streaming").encode(), config.kvstore.ttl_s)
print("registered", flush=True)
threading.Event().wait()
"""


@dataclass
class KvServer:
    """A `sectorflow kvstore` process serving ``config``."""

    config: Config
    path: Path
    processes: Processes
    process: subprocess.Popen = field(init=False)
    starts: int = 0
    pair: str = ""  # "primary" or "backup" of the pair the configuration's [kvstore] servers lists

    def start(self) -> subprocess.Popen:
        self.starts += 1
        pair = ("--pair", self.pair) if self.pair else ()
        self.process = self.processes.sectorflow("kvstore", "--config", str(self.path), *pair,
                                                 name=f"kvstore{self.pair}{self.starts}")
        wait_until(lambda: self.process.poll() is not None or "state starting -> idle" in self.log(), SERVER_START_S,
                   "the kvstore server to serve")
        assert self.process.poll() is None, self.log()
        return self.process

    def log(self) -> str:
        return self.processes.output(self.process)

    @property
    def port(self) -> int:
        if self.pair:
            return int(self.config.kvstore.servers[0 if self.pair == "primary" else 1].rpartition(":")[2])
        return self.config.kvstore.port


def start_kvstore(make_config: Callable, processes: Processes, **overrides: object) -> KvServer:
    config, path = make_config(**overrides)
    server = KvServer(config, path, processes)
    server.start()
    return server


@pytest.fixture
def kvstore(make_config: Callable, processes: Processes) -> KvServer:
    """A running server on free ports (heartbeat 200 ms, ttl 1 s from make_config)."""
    return start_kvstore(make_config, processes)


@pytest.fixture
def clients() -> Iterator[Callable[..., Client]]:
    """``clients(config, subtree="")`` makes a Client that is closed at teardown."""
    made: list[Client] = []

    def make(config: Config, subtree: str = "") -> Client:
        client = Client(client_options(config, subtree))
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def start_registering_client(processes: Processes, tmp_path: Path, config_path: Path, name: str) -> subprocess.Popen:
    """A process that sets status/producer/<name> with the configured ttl and lives until killed."""
    script = tmp_path / "registering_client.py"
    script.write_text(REGISTERING_SCRIPT)
    process = processes.start(sys.executable, str(script), str(config_path), name, name=name)
    wait_until(lambda: process.poll() is not None or "registered" in processes.output(process), SERVER_START_S,
               f"client {name} to register")
    assert process.poll() is None, processes.output(process)
    return process


def server_status(client: Client) -> ServiceStatus | None:
    """The server's own status as a replica sees it."""
    raw = client.get(status_key("kvstore", "server"))
    return None if raw is None else ServiceStatus.decode(raw)


class RawPeer:
    """CHP spoken by hand with pyzmq, as a hostile or careless peer would: our codec and client stay out.

    ``writer`` is a PUB to P+2 (KVSET), ``snapshots`` a DEALER to P (ICANHAZ?) that reads only
    when told to: set ``rcvhwm`` low to model a client that asks for snapshots and never reads.
    ``source`` is the loopback address the peer connects from (any 127.x.y.z works on Linux): the
    server charges the keys a peer writes to that address.
    """

    RESEND_S = 0.1  # a PUB drops what it sends before the server's subscription arrives: resend

    def __init__(self, port: int, rcvhwm: int = 1000, source: str = "127.0.0.1") -> None:
        self.context = zmq.Context()
        self.writer = self.context.socket(zmq.PUB)
        self.snapshots = self.context.socket(zmq.DEALER)
        self.snapshots.rcvhwm = rcvhwm
        for sock in (self.writer, self.snapshots):
            sock.linger = 0
        self.writer.connect(f"tcp://{source}:0;127.0.0.1:{port + 2}")
        self.snapshots.connect(f"tcp://{source}:0;127.0.0.1:{port}")

    def close(self) -> None:
        self.writer.close()
        self.snapshots.close()
        self.context.term()

    def kvset(self, key: bytes, body: bytes, properties: bytes = b"") -> None:
        """One KVSET, [key, sequence 0, uuid, properties, body]; lost if the server does not listen yet."""
        self.writer.send_multipart([key, struct.pack("!q", 0), uuid.uuid4().bytes, properties, body])

    def kvset_until(self, key: bytes, body: bytes, condition: Callable[[], object], what: str,
                    properties: bytes = b"") -> None:
        """Send a KVSET again every RESEND_S until ``condition()`` holds (what the server did with it)."""
        deadline = time.monotonic() + SYNC_S
        while True:
            self.kvset(key, body, properties)
            try:
                shared_wait_until(condition, self.RESEND_S, what)
                return
            except WaitTimeout:
                if time.monotonic() > deadline:
                    pytest.fail(f"timed out after {SYNC_S:g} s waiting for {what}")


@pytest.fixture
def raw_peer(kvstore: KvServer) -> Iterator[RawPeer]:
    """A RawPeer of the ``kvstore`` fixture's server, closed at teardown."""
    peer = RawPeer(kvstore.port)
    yield peer
    peer.close()
