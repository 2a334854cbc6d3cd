"""Our client against a CHP server written here with plain pyzmq: it must take the snapshot, apply
updates in order, discard stale ones, resync on a gap, count malformed messages and send KVSETs
exactly as the Guide specifies them."""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import pytest
import zmq
from harness import free_port_block
from support import LOOPBACK, wait_until

from sectorflow.configs import Config, KvstoreConfig
from sectorflow.kvstore import Client, ClientOptions, KvstoreError, client_options

SYNC_S = 10.0


def options_for(port: int, **kvstore: Any) -> ClientOptions:
    """A client of a server on 127.0.0.1:port with the schema's [kvstore] defaults, changed where a test says."""
    return client_options(Config(kvstore=KvstoreConfig(host="127.0.0.1", port=port, **kvstore)))


def kvmsg(key: bytes, sequence: int, body: bytes = b"", props: bytes = b"") -> list[bytes]:
    return [key, struct.pack("!q", sequence), b"", props, body]


class FakeServer:
    """ROUTER on P, PUB on P+1, SUB on P+2, driven step by step by the test."""

    def __init__(self) -> None:
        self.port = free_port_block(LOOPBACK, 3)
        context = zmq.Context.instance()
        self.router = context.socket(zmq.ROUTER)
        self.publisher = context.socket(zmq.PUB)
        self.collector = context.socket(zmq.SUB)
        self.collector.subscribe(b"")
        for offset, sock in enumerate((self.router, self.publisher, self.collector)):
            sock.linger = 0
            sock.bind(f"tcp://127.0.0.1:{self.port + offset}")

    def close(self) -> None:
        for sock in (self.router, self.publisher, self.collector):
            sock.close()

    def await_snapshot_request(self, hugz_sequence: int) -> tuple[bytes, bytes]:
        """Send HUGZ until the client asks for a snapshot (it waits for its subscription to work)."""
        for _ in range(int(SYNC_S / 0.05)):
            self.publisher.send_multipart(kvmsg(b"HUGZ", hugz_sequence))
            if self.router.poll(50):
                identity, command, subtree = self.router.recv_multipart()
                assert command == b"ICANHAZ?"
                return identity, subtree
        pytest.fail("the client never sent ICANHAZ?")

    def snapshot(self, identity: bytes, entries: dict[bytes, bytes], sequence: int, subtree: bytes = b"") -> None:
        for key, body in entries.items():
            self.router.send_multipart([identity, *kvmsg(key, 1, body)])
        self.router.send_multipart([identity, *kvmsg(b"KTHXBAI", sequence, subtree)])


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    server = FakeServer()
    yield server
    server.close()


@pytest.fixture
def client_of() -> Iterator[Callable[[FakeServer], Client]]:
    made: list[Client] = []

    def make(server: FakeServer) -> Client:
        # The fake server is silent between steps: a long heartbeat keeps the client from reconnecting.
        client = Client(options_for(server.port, heartbeat_ms=2000))
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def test_client_applies_snapshot_then_newer_updates_only(
    fake_server: FakeServer, client_of: Callable[[FakeServer], Client]
) -> None:
    client = client_of(fake_server)
    identity, subtree = fake_server.await_snapshot_request(hugz_sequence=10)
    assert subtree == b""
    fake_server.snapshot(identity, {b"a": msgpack.packb(1)}, sequence=10)
    assert client.wait_synced(SYNC_S)
    assert client.get("a") == msgpack.packb(1) and client.sequence() == 10

    fake_server.publisher.send_multipart(kvmsg(b"a", 10, msgpack.packb(99)))  # not newer: stale
    fake_server.publisher.send_multipart(kvmsg(b"b", 11, msgpack.packb(2)))
    fake_server.publisher.send_multipart(kvmsg(b"a", 12))  # empty body: delete
    wait_until(lambda: client.sequence() == 12, SYNC_S, "updates 11 and 12")
    assert client.get("b") == msgpack.packb(2) and client.get("a") is None
    assert client.stats().stale == 1 and client.stats().updates == 2


def test_client_resyncs_when_a_sequence_is_missing(
    fake_server: FakeServer, client_of: Callable[[FakeServer], Client]
) -> None:
    client = client_of(fake_server)
    identity, _ = fake_server.await_snapshot_request(hugz_sequence=3)
    fake_server.snapshot(identity, {}, sequence=3)
    assert client.wait_synced(SYNC_S)

    fake_server.publisher.send_multipart(kvmsg(b"late", 5, msgpack.packb(5)))  # 4 never came
    assert fake_server.router.poll(int(SYNC_S * 1000)), "no new snapshot request after the gap"
    identity, command, _ = fake_server.router.recv_multipart()
    assert command == b"ICANHAZ?"
    assert client.get("late") is None and client.stats().resyncs == 1
    fake_server.snapshot(identity, {b"late": msgpack.packb(5)}, sequence=5)
    wait_until(lambda: client.synced() and client.get("late") == msgpack.packb(5), SYNC_S, "the resync")


def test_client_counts_malformed_messages_from_the_server(
    fake_server: FakeServer, client_of: Callable[[FakeServer], Client]
) -> None:
    client = client_of(fake_server)
    identity, _ = fake_server.await_snapshot_request(hugz_sequence=0)
    fake_server.snapshot(identity, {}, sequence=0)
    assert client.wait_synced(SYNC_S)
    fake_server.publisher.send_multipart([b"k", b"\x00\x01"])  # two frames
    fake_server.publisher.send_multipart(kvmsg(b"ok", 1, msgpack.packb(1)))
    wait_until(lambda: client.get("ok"), SYNC_S, "the good update after the bad one")
    assert client.stats().malformed == 1


def test_client_sends_kvsets_in_the_guide_format(
    fake_server: FakeServer, client_of: Callable[[FakeServer], Client]
) -> None:
    client = client_of(fake_server)
    client.set("status/producer/r0t0", msgpack.packb({"state": "idle"}), ttl_s=1.5)
    client.set_once("acquire/request", msgpack.packb({"scan": 1}))
    client.erase("nodegroups/gone")
    received = []
    for _ in range(3):
        assert fake_server.collector.poll(int(SYNC_S * 1000)), f"only {len(received)} KVSETs arrived"
        received.append(fake_server.collector.recv_multipart())
    assert [frames[0] for frames in received] == [b"status/producer/r0t0", b"acquire/request", b"nodegroups/gone"]
    key, sequence, uuid, props, body = received[0]
    assert len(sequence) == 8 and len(uuid) == 16 and props == b"ttl=1.5\n"
    assert msgpack.unpackb(body) == {"state": "idle"}
    assert received[1][3] == b"" and received[2][4] == b"", "set_once has no ttl; erase has an empty body"
    assert len({frames[2] for frames in received}) == 3, "every KVSET has its own uuid"


def test_client_asks_again_on_a_new_socket_when_its_snapshot_stops(fake_server: FakeServer) -> None:
    # A server drops the snapshot of a client that does not read it (server.hpp) and goes on
    # sending HUGZ: the client must not stay in syncing for ever, and what is left of the old reply
    # must not end the new snapshot.
    client = Client(options_for(fake_server.port, heartbeat_ms=200))
    try:
        first, _ = fake_server.await_snapshot_request(hugz_sequence=5)
        fake_server.router.send_multipart([first, *kvmsg(b"a", 1, msgpack.packb(1))])  # and nothing more
        second = command = None
        for _ in range(int(SYNC_S / 0.05)):  # the fake server's heartbeat, as in await_snapshot_request
            fake_server.publisher.send_multipart(kvmsg(b"HUGZ", 5))
            if fake_server.router.poll(50):
                second, command, _ = fake_server.router.recv_multipart()
                break
        assert command == b"ICANHAZ?", "the client never asked again"
        assert second != first, "the client asked again on a new socket"
        fake_server.snapshot(first, {b"stale": msgpack.packb(0)}, sequence=4)  # goes with the old socket
        fake_server.snapshot(second, {b"a": msgpack.packb(1), b"b": msgpack.packb(2)}, sequence=5)
        assert client.wait_synced(SYNC_S)
        assert client.subtree() == {"a": msgpack.packb(1), "b": msgpack.packb(2)} and client.sequence() == 5
        assert client.stats().resyncs == 1
    finally:
        client.close()


def test_client_refuses_what_the_server_would_refuse_or_clamp(fake_server: FakeServer) -> None:
    client = Client(options_for(fake_server.port, max_value_bytes=1024, max_ttl_s=60.0))
    try:
        with pytest.raises(KvstoreError, match=r"kvstore set 'k': value of 2003 bytes, the server takes at most 1024 "
                                               r"\(\[kvstore\] max_value_bytes\)"):
            client.set("k", msgpack.packb(b"v" * 2000))
        with pytest.raises(KvstoreError, match=r"kvstore set 'k': ttl_s 61.000000 is above the server's max_ttl_s "
                                               r"60.000000 \(\[kvstore\] max_ttl_s\)"):
            client.set_once("k", msgpack.packb(1), ttl_s=61.0)
        client.set("k", msgpack.packb(b"v" * 1000), ttl_s=60.0)
    finally:
        client.close()


def test_a_client_waiting_for_its_server_keeps_its_connections_through_silence() -> None:
    # A server that accepts TCP connections but has not answered yet (starting, or a CURVE
    # handshake under way on a loaded host): the client must wait on the same connections. New
    # sockets at each silence period would cut off the handshakes, and a secured server counts
    # each cut-off handshake as a refused peer.
    port = free_port_block(LOOPBACK, 3)  # held by plain listeners that accept and never speak
    listeners = []
    for offset in range(3):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, port + offset))
        listener.listen(16)
        listeners.append(listener)
    accepted: list[list[socket.socket]] = [[], [], []]
    client = Client(options_for(port, heartbeat_ms=50))  # silence: 3 heartbeats, 150 ms
    try:
        # A window of twenty silence periods (the property is that nothing happens in it).
        window_end = time.monotonic() + 20 * 0.150
        while (left := window_end - time.monotonic()) > 0:
            readable, _, _ = select.select(listeners, [], [], left)
            for listener in readable:
                accepted[listeners.index(listener)].append(listener.accept()[0])
        assert [len(connections) for connections in accepted] == [1, 1, 1], \
            "one connection per socket, held while the server stays silent"
        assert client.stats().resyncs == 0
    finally:
        client.close()
        for connection in (c for connections in accepted for c in connections):
            connection.close()
        for listener in listeners:
            listener.close()
