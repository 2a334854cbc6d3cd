"""A Clone client written here from the ZeroMQ Guide's protocol description (CHP, chapter 5) with
plain pyzmq and struct, not with our codec or client: the third-party client the kvstore must serve.
``GuideClient`` talks to one server; ``GuideServerListClient`` is the Guide's last model (clone
agent of model six): a list of servers, the subscriber and the snapshot socket on one at a time,
updates published to every server, and a server silent for the silence period left for the next,
whose snapshot request is the Binary Star vote (chapter 4)."""

from __future__ import annotations

import struct
import time
import uuid

import pytest
import zmq

SYNC_S = 10.0
RESEND_S = 0.1  # a PUB drops what it sends before the server's subscription arrives: resend
LOOPBACK = "127.0.0.1"


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
        self.snapshot.connect(f"tcp://{LOOPBACK}:{port}")
        self.subscriber.connect(f"tcp://{LOOPBACK}:{port + 1}")
        self.publisher.connect(f"tcp://{LOOPBACK}:{port + 2}")
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
            update = self.apply(self.recv(self.subscriber, deadline - time.monotonic()))
            if update is not None:
                return update
        pytest.fail("no update from the server")

    def apply(self, frames: list[bytes]) -> tuple[bytes, int, bytes, bytes] | None:
        """A KVPUB newer than our sequence applied to kvmap, as (key, sequence, properties, body);
        None for a HUGZ or an update we have."""
        key, seq, _uuid, props, body = frames
        sequence = struct.unpack("!q", seq)[0]
        if key == b"HUGZ" or sequence <= self.sequence:
            return None
        self.sequence = sequence
        if body:
            self.kvmap[key] = body
        else:
            self.kvmap.pop(key, None)
        return key, sequence, props, body

    def kvset(self, key: bytes, body: bytes, ttl_s: int = 0) -> None:
        props = b"ttl=%d\n" % ttl_s if ttl_s else b""
        self.publisher.send_multipart([key, struct.pack("!q", 0), uuid.uuid4().bytes, props, body])


class GuideServerListClient(GuideClient):
    """The Guide's model-six client: ``ports`` lists the servers, primary first. Its publisher reaches
    every server's collector; its snapshot and subscriber sockets one server, the current one."""

    def __init__(self, context: zmq.Context, ports: list[int], silence_s: float) -> None:
        super().__init__(context, ports[0])
        for port in ports[1:]:
            self.publisher.connect(f"tcp://{LOOPBACK}:{port + 2}")
        self.context, self.ports, self.silence_s = context, ports, silence_s
        self.current = 0
        self.moves = 0

    def move_on(self) -> None:
        """To the next server of the list: new snapshot and subscriber sockets there, an empty map."""
        self.snapshot.close()
        self.subscriber.close()
        self.current = (self.current + 1) % len(self.ports)
        self.moves += 1
        port = self.ports[self.current]
        self.snapshot = self.context.socket(zmq.DEALER)
        self.subscriber = self.context.socket(zmq.SUB)
        for sock in (self.snapshot, self.subscriber):
            sock.linger = 0
        self.subscriber.subscribe(self.subtree)
        self.subscriber.subscribe(b"HUGZ")
        self.snapshot.connect(f"tcp://{LOOPBACK}:{port}")
        self.subscriber.connect(f"tcp://{LOOPBACK}:{port + 1}")
        self.kvmap, self.sequence = {}, 0

    def sync(self, timeout_s: float = 3 * SYNC_S) -> None:
        """A snapshot from the first server of the list (from the current one on) that answers within
        the silence period; a server that does not is left for the next."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.snapshot.send_multipart([b"ICANHAZ?", self.subtree])
            if self.snapshot.poll(int(self.silence_s * 1000)):
                self.get_snapshot_reply()
                return
            self.move_on()
        pytest.fail(f"no server of {self.ports} gave a snapshot in {timeout_s:g} s")

    def get_snapshot_reply(self) -> None:
        for _ in range(10_000):
            key, seq, _uuid, _props, body = self.recv(self.snapshot, SYNC_S)
            if key == b"KTHXBAI":
                self.sequence = struct.unpack("!q", seq)[0]
                return
            self.kvmap[key] = body
        pytest.fail("no KTHXBAI after 10000 KVSYNC")

    def follow(self) -> bool:
        """Apply what the current server publishes during one silence period; a server silent for all
        of it (not even HUGZ) is left for the next and a snapshot taken there. True if it moved."""
        end = time.monotonic() + self.silence_s
        heard = False
        while self.subscriber.poll(max(0, int((end - time.monotonic()) * 1000))):
            key, seq, _uuid, _props, body = self.subscriber.recv_multipart()
            heard = True
            sequence = struct.unpack("!q", seq)[0]
            if key != b"HUGZ" and sequence > self.sequence:
                self.sequence = sequence
                if body:
                    self.kvmap[key] = body
                else:
                    self.kvmap.pop(key, None)
            if time.monotonic() >= end:
                break
        if heard:
            return False
        self.move_on()
        self.sync()
        return True


def kvset_until_published(client: GuideClient, key: bytes, body: bytes, ttl_s: int = 0) -> tuple[bytes, int, bytes]:
    """Send a KVSET until its KVPUB comes back, resending every RESEND_S: our PUB may not be connected
    yet, and a subscriber just connected may miss the KVPUB (its subscription still on the way, the
    Clone pattern's slow joiner); bounded."""
    deadline = time.monotonic() + SYNC_S
    while time.monotonic() < deadline:
        client.kvset(key, body, ttl_s)
        resend_at = time.monotonic() + RESEND_S
        while client.subscriber.poll(max(0, int((resend_at - time.monotonic()) * 1000))):
            update = client.apply(client.recv(client.subscriber, 0.0))
            if update is not None and update[0] == key and update[3] == body:
                return update[2], update[1], update[3]
    pytest.fail(f"KVSET {key!r} never published")
