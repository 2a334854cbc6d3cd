"""Clients of a kvstore pair (kvstore/SPEC.md, "The pair", "The clients"): a client configured with
`[kvstore] servers` = two real `sectorflow kvstore` processes on loopback (plain servers, not a pair:
each is its own stack) syncs with the first, sends every write to both, and moves to the second when
the first is SIGKILLed: its replica becomes the second's and its own keys are written there (and on
the first again when it comes back)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgpack
import pytest
from harness import free_port_block
from kvstore_support import SYNC_S, KvServer, server_status, start_kvstore, start_registering_client
from support import LOOPBACK, Processes, sectorflow_command, wait_until

from sectorflow.configs import Config
from sectorflow.kvstore import SERVER_FIELD, STACK_ID_FIELD, Client, client_options
from sectorflow.protocol import ServiceStatus, status_key

OWN_STATUS = status_key("producer", "pair-client")


def address(server: KvServer) -> str:
    return f"{LOOPBACK}:{server.port}"


def silence_s(config: Config) -> float:
    return config.kvstore.heartbeat_ms * config.kvstore.silence_heartbeats / 1000.0


class Logged:
    """A client whose log lines are kept."""

    def __init__(self, config: Config) -> None:
        self.lines: list[str] = []
        self.client = Client(client_options(config, log=self.lines.append))

    def moves(self) -> list[str]:
        return [line for line in self.lines if "moving to" in line]


@pytest.fixture
def two_servers(make_config: Callable, processes: Processes) -> tuple[KvServer, KvServer]:
    return start_kvstore(make_config, processes), start_kvstore(make_config, processes)


@pytest.fixture
def logged() -> Iterator[Callable[[Config], Logged]]:
    made: list[Logged] = []

    def make(config: Config) -> Logged:
        made.append(Logged(config))
        return made[-1]

    yield make
    for one in made:
        one.client.close()


@pytest.fixture
def readers() -> Iterator[Callable[[KvServer], Client]]:
    """A client of one server only (its own configuration: `servers` empty)."""
    made: list[Client] = []

    def make(server: KvServer) -> Client:
        made.append(Client(client_options(server.config)))
        assert made[-1].wait_synced(SYNC_S)
        return made[-1]

    yield make
    for client in made:
        client.close()


def status_of(reader: Client, key: str) -> ServiceStatus | None:
    raw = reader.get(key)
    return None if raw is None else ServiceStatus.decode(raw)


def server_named(reader: Client, key: str) -> object:
    """The server the status at ``key`` says its writer synced with last, or None."""
    status = status_of(reader, key)
    return None if status is None else status.extra.get(SERVER_FIELD)


def kill(server: KvServer) -> None:
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()


def test_a_client_moves_to_the_second_server_when_the_first_is_killed_and_registers_there(
    make_config: Callable, two_servers: tuple[KvServer, KvServer], logged: Callable[[Config], Logged],
    readers: Callable[[KvServer], Client],
) -> None:
    a, b = two_servers
    config, _ = make_config(kvstore={"servers": [address(a), address(b)]})
    pair = logged(config)
    assert pair.client.wait_synced(SYNC_S)
    assert pair.client.server == address(a)
    reader_a, reader_b = readers(a), readers(b)
    reader_b.set_once("marks/b", msgpack.packb("only on b"))
    wait_until(lambda: reader_b.get("marks/b") is not None, SYNC_S, "b's mark on b")
    assert pair.client.get("marks/b") is None  # the client's replica is a's

    pair.client.set(OWN_STATUS, ServiceStatus(state="streaming").encode(), config.kvstore.ttl_s)
    wait_until(lambda: server_named(reader_a, OWN_STATUS) == address(a),
               SYNC_S, "the client's status on a, naming a")
    wait_until(lambda: status_of(reader_b, OWN_STATUS) is not None, SYNC_S, "the client's status mirrored to b")

    killed = time.monotonic()
    kill(a)
    wait_until(lambda: pair.client.server == address(b) and pair.client.synced(), 3 * SYNC_S, "the client on b")
    moved_s = time.monotonic() - killed
    print(f"kill of the first server to the client synced with the second: {moved_s:.3f} s "
          f"(silence period {silence_s(config):g} s)")
    assert moved_s <= 3 * silence_s(config), f"moved after {moved_s:.3f} s"

    # Its replica is b's (b's stack, b's keys, b's sequence), its own status is on b and says so.
    b_stack = server_status(reader_b).extra[STACK_ID_FIELD]
    assert pair.client.stack_id == b_stack and pair.client.first_stack_id != b_stack
    assert pair.client.get("marks/b") == msgpack.packb("only on b")
    wait_until(lambda: pair.client.sequence() == reader_b.sequence()
               and pair.client.subtree() == reader_b.subtree(), SYNC_S, "the client's replica to be b's")
    wait_until(lambda: server_named(reader_b, OWN_STATUS) == address(b),
               SYNC_S, "the client's status on b, naming b")
    wait_until(lambda: server_named(pair.client, OWN_STATUS) == address(b),
               SYNC_S, "the client's own replica to hold its status from b")

    # One line for the move, and it is counted.
    assert pair.moves() == [f"kvstore at {address(a)} silent for {silence_s(config):g} s: moving to {address(b)}"]
    assert pair.client.stats().server_moves == 1
    assert pair.client.stats().unmirrored == 0

    # b stays live: the client stays there.
    reader_b.set_once("marks/later", msgpack.packb(1))
    wait_until(lambda: pair.client.get("marks/later") is not None, SYNC_S, "a later update of b")
    assert pair.client.stats().server_moves == 1 and pair.client.server == address(b)

    # a restarted (a new, empty stack) gets the client's own keys at once, the client staying on b.
    a.start()
    again = readers(a)
    wait_until(lambda: server_named(again, OWN_STATUS) == address(b), SYNC_S, "the client's status on the restarted a")
    assert f"republishing 1 own keys to {address(a)}" in pair.lines
    assert pair.client.stats().server_moves == 1 and pair.client.server == address(b)


def test_every_write_of_a_pair_client_reaches_both_servers(
    make_config: Callable, two_servers: tuple[KvServer, KvServer], logged: Callable[[Config], Logged],
    readers: Callable[[KvServer], Client],
) -> None:
    a, b = two_servers
    config, _ = make_config(kvstore={"servers": [address(a), address(b)]})
    writer = logged(config).client
    assert writer.wait_synced(SYNC_S)
    reader_a, reader_b = readers(a), readers(b)
    writer.set("pair/own", msgpack.packb("own"), config.kvstore.ttl_s)
    writer.set_once("pair/once", msgpack.packb("once"))
    for reader in (reader_a, reader_b):
        wait_until(lambda r=reader: r.get("pair/own") == msgpack.packb("own") and r.get("pair/once") is not None,
                   SYNC_S, "both writes on each server")
    writer.erase("pair/once")
    for reader in (reader_a, reader_b):
        wait_until(lambda r=reader: r.get("pair/once") is None, SYNC_S, "the deletion on each server")
    # The own key is refreshed on both (ttl 1 s): still there after several ttls.
    refreshes = writer.stats().sent
    wait_until(lambda: writer.stats().sent >= refreshes + 6, SYNC_S, "six more refreshes")
    assert reader_a.get("pair/own") is not None and reader_b.get("pair/own") is not None
    assert writer.stats().server_moves == 0 and writer.server == address(a)


def test_a_client_whose_first_server_never_answers_syncs_with_the_second(
    make_config: Callable, processes: Processes, logged: Callable[[Config], Logged],
) -> None:
    b = start_kvstore(make_config, processes)
    nobody = f"{LOOPBACK}:{free_port_block(LOOPBACK, 3)}"
    config, path = make_config(kvstore={"servers": [nobody, address(b)]})
    pair = logged(config)
    assert pair.client.wait_synced(SYNC_S)
    assert pair.client.server == address(b)
    assert pair.moves() == [f"kvstore at {nobody} silent for {silence_s(config):g} s: moving to {address(b)}"]
    # `sectorflow status` of the pair names the server it read.
    status = sectorflow_command("status", "--config", str(path))
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"kvstore tcp://{address(b)}: stack "), status.stdout
    b.process.send_signal(signal.SIGTERM)
    b.process.wait()
    silent = sectorflow_command("status", "--config", str(path), "--timeout", "0.5")
    assert silent.returncode == 1
    assert silent.stderr.strip().splitlines() == [
        f"sectorflow status: error: no kvstore server answered at tcp://{nobody} or tcp://{address(b)} within 0.5 s; "
        f"start one with 'sectorflow kvstore --config {path}'"]


def test_a_list_of_one_server_is_a_single_server(
    make_config: Callable, processes: Processes, logged: Callable[[Config], Logged],
    readers: Callable[[KvServer], Client],
) -> None:
    server = start_kvstore(make_config, processes)
    config, _ = make_config(kvstore={"servers": [address(server)]})
    one = logged(config)
    assert one.client.wait_synced(SYNC_S) and one.client.server == address(server)
    one.client.set(OWN_STATUS, ServiceStatus(state="idle").encode(), config.kvstore.ttl_s)
    reader = readers(server)
    wait_until(lambda: status_of(reader, OWN_STATUS) is not None, SYNC_S, "the status")
    assert SERVER_FIELD not in status_of(reader, OWN_STATUS).extra  # no choice of server, nothing to say
    # Killed and restarted, the server gets the client back on the same address, as a single server does.
    kill(server)
    server.start()
    again = readers(server)
    wait_until(lambda: status_of(again, OWN_STATUS) is not None, 3 * SYNC_S,
               "the client's status on the restarted server")
    assert one.client.stats().server_moves == 0 and one.moves() == []


def test_a_client_process_registers_on_the_second_server_when_the_first_is_killed(
    make_config: Callable, two_servers: tuple[KvServer, KvServer], processes: Processes, tmp_path: Path,
    readers: Callable[[KvServer], Client],
) -> None:
    a, b = two_servers
    _, path = make_config(kvstore={"servers": [address(a), address(b)]})
    service = start_registering_client(processes, tmp_path, path, "pair-service")
    key = status_key("producer", "pair-service")
    reader_a, reader_b = readers(a), readers(b)
    wait_until(lambda: server_named(reader_a, key) == address(a), SYNC_S, "the service's status on a, naming a")
    wait_until(lambda: status_of(reader_b, key) is not None, SYNC_S, "the service's status mirrored to b")
    kill(a)
    wait_until(lambda: server_named(reader_b, key) == address(b), 3 * SYNC_S, "the service's status on b, naming b")
    assert service.poll() is None
    # Two plain servers are two stacks: the move is also a stack change, which the service warns of.
    assert f"the kvstore at tcp://{address(b)} is stack " in processes.output(service)
