"""The server on the wire: a Clone client written here from the Guide's protocol description
(CHP, ZeroMQ Guide chapter 5) with plain pyzmq and struct, not with our codec or client, and
malformed frames that the server must reject and count without falling over."""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable, Iterator

import msgpack
import pytest
import zmq
from support import wait_until
from kvstore_support import KvServer, clients, kvstore, server_status  # noqa: F401  (fixtures)

from sectorflow.kvstore import Client, is_stack_id
from sectorflow.protocol import ServiceStatus, status_key

SYNC_S = 10.0
RESEND_S = 0.1  # a PUB drops what it sends before the server's subscription arrives: resend


class GuideClient:
    """CHP client: DEALER to P (snapshot), SUB to P+1 (updates), PUB to P+2 (KVSET)."""

    def __init__(self, context: zmq.Context, port: int, subtree: bytes = b"") -> None:
        self.subtree = subtree
        self.snapshot = context.socket(zmq.DEALER)
        self.subscriber = context.socket(zmq.SUB)
        self.publisher = context.socket(zmq.PUB)
        for sock in (self.snapshot, self.subscriber, self.publisher):
            sock.linger = 0
        self.subscriber.subscribe(subtree)
        self.subscriber.subscribe(b"HUGZ")
        self.snapshot.connect(f"tcp://127.0.0.1:{port}")
        self.subscriber.connect(f"tcp://127.0.0.1:{port + 1}")
        self.publisher.connect(f"tcp://127.0.0.1:{port + 2}")
        self.kvmap: dict[bytes, bytes] = {}
        self.sequence = 0

    def close(self) -> None:
        for sock in (self.snapshot, self.subscriber, self.publisher):
            sock.close()

    def recv(self, sock: zmq.Socket, timeout_s: float) -> list[bytes]:
        assert sock.poll(int(timeout_s * 1000)), "no message from the server"
        frames = sock.recv_multipart()
        assert len(frames) == 5, frames
        assert len(frames[1]) == 8
        return frames

    def get_snapshot(self) -> None:
        """ICANHAZ? + subtree; KVSYNC* until KTHXBAI, whose sequence we keep."""
        self.snapshot.send_multipart([b"ICANHAZ?", self.subtree])
        for _ in range(10_000):
            key, seq, _uuid, _props, body = self.recv(self.snapshot, SYNC_S)
            if key == b"KTHXBAI":
                self.sequence = struct.unpack("!q", seq)[0]
                assert body == self.subtree
                return
            self.kvmap[key] = body
        pytest.fail("no KTHXBAI after 10000 KVSYNC")

    def next_update(self, timeout_s: float = SYNC_S) -> tuple[bytes, int, bytes, bytes]:
        """The next KVPUB newer than our sequence, applied to kvmap; HUGZ are skipped."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            key, seq, _uuid, props, body = self.recv(self.subscriber, deadline - time.monotonic())
            sequence = struct.unpack("!q", seq)[0]
            if key == b"HUGZ" or sequence <= self.sequence:
                continue
            self.sequence = sequence
            if body:
                self.kvmap[key] = body
            else:
                self.kvmap.pop(key, None)
            return key, sequence, props, body
        pytest.fail("no update from the server")

    def kvset(self, key: bytes, body: bytes, ttl_s: int = 0) -> None:
        props = b"ttl=%d\n" % ttl_s if ttl_s else b""
        self.publisher.send_multipart([key, struct.pack("!q", 0), uuid.uuid4().bytes, props, body])


@pytest.fixture
def guide_client(kvstore: KvServer) -> Iterator[GuideClient]:
    client = GuideClient(zmq.Context.instance(), kvstore.port)
    yield client
    client.close()


def kvset_until_published(client: GuideClient, key: bytes, body: bytes, ttl_s: int = 0) -> tuple[bytes, int, bytes]:
    """Send a KVSET until its KVPUB comes back (the PUB may not be connected yet); bounded."""
    deadline = time.monotonic() + SYNC_S
    while time.monotonic() < deadline:
        client.kvset(key, body, ttl_s)
        resend_at = time.monotonic() + RESEND_S
        while client.subscriber.poll(max(0, int((resend_at - time.monotonic()) * 1000))):
            got_key, sequence, props, got_body = client.next_update()
            if got_key == key and got_body == body:
                return props, sequence, got_body
    pytest.fail(f"KVSET {key!r} never published")


def test_guide_client_snapshots_sets_and_receives_updates(
    kvstore: KvServer, guide_client: GuideClient, clients: Callable[..., Client]
) -> None:
    ours = clients(kvstore.config)
    ours.set(status_key("producer", "r0t0"), ServiceStatus(state="idle", scan=4).encode())
    wait_until(lambda: ours.get(status_key("producer", "r0t0")), SYNC_S, "our client's key")

    # Subscription first, then the snapshot, as the Guide's client does.
    guide_client.recv(guide_client.subscriber, SYNC_S)
    guide_client.get_snapshot()
    decoded = ServiceStatus.decode(guide_client.kvmap[b"status/producer/r0t0"])
    assert (decoded.state, decoded.scan) == ("idle", 4)
    assert guide_client.sequence >= 2

    # Guide client -> server -> our replica.
    body = msgpack.packb({"from": "guide"})
    props, sequence, _ = kvset_until_published(guide_client, b"guide/key", body)
    assert sequence > 0 and props == b""
    wait_until(lambda: ours.get("guide/key") == body, SYNC_S, "the guide client's key in our replica")

    # Our client -> server -> guide client, with the next sequence number.
    ours.set("ours/key", msgpack.packb(7))
    for _ in range(100):
        key, new_sequence, _, got = guide_client.next_update()
        if key == b"ours/key":
            break
    assert got == msgpack.packb(7) and new_sequence > sequence


def test_guide_client_ttl_expires_and_the_deletion_is_published(
    guide_client: GuideClient, kvstore: KvServer
) -> None:
    guide_client.recv(guide_client.subscriber, SYNC_S)
    guide_client.get_snapshot()
    props, sequence, _ = kvset_until_published(guide_client, b"ephemeral", msgpack.packb(1), ttl_s=1)
    assert props == b"ttl=1\n"
    for _ in range(100):
        key, deleted_at, _, body = guide_client.next_update()
        if key == b"ephemeral":
            break
    assert body == b"" and deleted_at > sequence
    assert b"ephemeral" not in guide_client.kvmap


def test_snapshot_of_a_subtree_holds_only_that_subtree_and_the_servers_status(
    kvstore: KvServer, clients: Callable[..., Client]
) -> None:
    writer = clients(kvstore.config)
    for key in ("nodegroups/a", "nodegroups/b", "status/producer/r0t0", "acquire/request"):
        writer.set(key, msgpack.packb(key))
    wait_until(lambda: len(writer.subtree("nodegroups/")) == 2 and writer.get("acquire/request"), SYNC_S,
               "the writer's keys")
    guide = GuideClient(zmq.Context.instance(), kvstore.port, subtree=b"nodegroups/")
    try:
        guide.get_snapshot()
        # The server's status comes with every snapshot: its stack_id names the stack (SPEC, "Wire").
        assert sorted(guide.kvmap) == [b"nodegroups/a", b"nodegroups/b", b"status/kvstore/server"]
        stack = ServiceStatus.decode(guide.kvmap[b"status/kvstore/server"]).extra["stack_id"]
        assert is_stack_id(stack) and stack == writer.stack_id
    finally:
        guide.close()


def test_malformed_frames_are_rejected_and_counted(
    kvstore: KvServer, guide_client: GuideClient, clients: Callable[..., Client]
) -> None:
    observer = clients(kvstore.config)
    assert observer.wait_synced(SYNC_S)
    guide_client.recv(guide_client.subscriber, SYNC_S)
    guide_client.get_snapshot()
    kvset_until_published(guide_client, b"before", msgpack.packb(1))  # the PUB is connected now

    seq0 = struct.pack("!q", 0)
    malformed = [
        [b"wrong/count", seq0, b""],  # 3 frames instead of 5
        [b"short/sequence", b"\x00\x01\x02\x03", b"", b"", msgpack.packb(1)],  # 4-byte sequence
        [b"bad/body", seq0, b"", b"", b"\xc1"],  # 0xc1 is never valid msgpack
    ]
    for frames in malformed:
        guide_client.publisher.send_multipart(frames)
    guide_client.snapshot.send_multipart([b"GIMME"])  # not ICANHAZ? on the snapshot port
    kvset_until_published(guide_client, b"after", msgpack.packb(2))  # sent after the bad ones: they were read

    wait_until(lambda: server_status(observer).extra["malformed"] == 4, SYNC_S, "the server to count 4 malformed")
    assert kvstore.process.poll() is None
    for key in ("wrong/count", "short/sequence", "bad/body"):
        assert observer.get(key) is None
    assert observer.get("after") == msgpack.packb(2)
    wait_until(lambda: "malformed message(s), 4 in all; last: " in kvstore.log(), SYNC_S,
               "the daemon to log the rejections")
