"""Fixtures of the kvstore integration tests: a real `sectorflow kvstore` server process, in-process
clients that are always closed, and a client process that registers itself and waits to be killed.
Import the fixtures into a test module to use them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import Processes, wait_until

from sectorflow.configs import Config
from sectorflow.kvstore import Client, ServiceStatus, client_options, status_key

SERVER_START_S = 20.0

# A service that registers a status with the configured ttl, says so, and waits to be killed.
REGISTERING_SCRIPT = """
import sys, threading
from sectorflow.configs import load_config
from sectorflow.kvstore import Client, ServiceStatus, status_key
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

    def start(self) -> subprocess.Popen:
        self.starts += 1
        self.process = self.processes.sectorflow("kvstore", "--config", str(self.path), name=f"kvstore{self.starts}")
        wait_until(lambda: self.process.poll() is not None or "-> serving" in self.log(), SERVER_START_S,
                   "the kvstore server to serve")
        assert self.process.poll() is None, self.log()
        return self.process

    def log(self) -> str:
        return self.processes.output(self.process)

    @property
    def port(self) -> int:
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
