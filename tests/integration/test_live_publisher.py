"""A NodeGroup's live publisher on real ZeroMQ sockets: a subscriber that never reads loses its own
updates, counted, while a subscriber that reads gets every one; and the publisher never waits."""

from __future__ import annotations

import threading

import numpy as np
import zmq
from support import wait_until

from sectorflow.live import wire
from sectorflow.live.publisher import LivePublisher

BATCHES = 100
EVENTS = 250_000  # 1 MB of events per batch: 100 MB, more than a never-reading subscriber's buffers hold
HWM = 48  # batches queued per subscriber: the reader may stall for a second without losing any


class FakeGroup:
    """The NodeGroup's side of the publisher: one big frame per take, once released."""

    live_dropped = 0

    def __init__(self) -> None:
        self.released = threading.Event()
        self.taken = 0

    def take_live(self) -> dict[str, object]:
        empty = not self.released.is_set() or self.taken >= BATCHES
        n = 0 if empty else 1
        position = np.array([self.taken] * n, dtype=np.uint64)
        if not empty:
            self.taken += 1
        return {"scan": np.full(n, 3, np.uint32), "scan_x": np.full(n, 10, np.uint32), "scan_y": np.full(n, 10, np.uint32),
                "position": position,
                "columns": {"bright_field": np.ones(n, np.float32), "dark_field": np.zeros(n, np.float32),
                            "com_x": np.zeros(n, np.float32), "com_y": np.zeros(n, np.float32)},
                "offsets": np.array([0, EVENTS][: n + 1], dtype=np.uint64), "events": np.zeros(EVENTS * n, np.uint32),
                "dropped": 0}


def test_a_subscriber_that_never_reads_loses_only_its_own_updates_and_they_are_counted() -> None:
    group = FakeGroup()
    publisher = LivePublisher(group, "ng-test", "127.0.0.1", "127.0.0.1", (576, 576), rate_hz=50.0, hwm=HWM)
    context = zmq.Context.instance()
    reader = context.socket(zmq.DEALER)
    idle = context.socket(zmq.DEALER)
    try:
        for socket in (reader, idle):
            socket.setsockopt(zmq.LINGER, 0)
            socket.setsockopt(zmq.RCVHWM, 1)
            socket.connect(publisher.endpoints["images"])
            socket.send(wire.SUBSCRIBE)
        wait_until(lambda: publisher.subscribers["images"] == 2, 10, "both subscriptions")
        group.released.set()
        seen: list[int] = []

        def received_all() -> bool:
            while reader.poll(0):
                batch = wire.decode(reader.recv_multipart())
                reader.send(wire.ack(batch.seq))  # reading holds the slot
                seen.extend(int(p) for p in batch.arrays["position"])
                assert len(batch.arrays["events"]) == EVENTS
            return len(seen) == BATCHES

        wait_until(received_all, 60, "the reading subscriber to get every batch")
        assert seen == list(range(BATCHES))
        # The idle subscriber's queue filled: what it missed is counted, in frames.
        assert 0 < publisher.images_dropped < BATCHES
        assert publisher.status_fields()["live_images_dropped"] == publisher.images_dropped
    finally:
        publisher.close()
        reader.close(0)
        idle.close(0)


def test_a_subscriber_that_leaves_is_forgotten() -> None:
    group = FakeGroup()
    publisher = LivePublisher(group, "ng-test", "127.0.0.1", "127.0.0.1", (576, 576), rate_hz=50.0, hwm=4)
    socket = zmq.Context.instance().socket(zmq.DEALER)
    try:
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(publisher.endpoints["frames"])
        socket.send(wire.SUBSCRIBE)
        wait_until(lambda: publisher.subscribers["frames"] == 1, 10, "the subscription")
        socket.send(wire.UNSUBSCRIBE)
        wait_until(lambda: publisher.subscribers["frames"] == 0, 10, "the unsubscription")
    finally:
        publisher.close()
        socket.close(0)


def test_hostile_requests_are_refused_and_counted_and_a_subscriber_is_still_served() -> None:
    from sectorflow.live.publisher import MAX_SUBSCRIBERS

    group = FakeGroup()
    publisher = LivePublisher(group, "ng-test", "127.0.0.1", "127.0.0.1", (576, 576), rate_hz=50.0, hwm=HWM)
    context = zmq.Context.instance()
    sockets: list[zmq.Socket] = []

    def dealer() -> zmq.Socket:
        socket = context.socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(publisher.endpoints["images"])
        sockets.append(socket)
        return socket

    try:
        attacker = dealer()
        attacker.send(b"x" * 1_000_000)  # beyond the request size: ZeroMQ drops the connection
        attacker = dealer()
        for request in (b"subscribe please", b"", b"\xff" * 40):
            attacker.send(request)
        attacker.send_multipart([wire.SUBSCRIBE, b"extra"])
        crowd = [dealer() for _ in range(MAX_SUBSCRIBERS)]
        for socket in crowd:
            socket.send(wire.SUBSCRIBE)
        # The crowd is in before the late ones ask (requests on separate connections come in any order).
        wait_until(lambda: publisher.subscribers["images"] == MAX_SUBSCRIBERS, 10, "a full crowd of subscribers")
        late = [dealer() for _ in range(3)]
        for socket in late:
            socket.send(wire.SUBSCRIBE)
        # 4 malformed requests and 3 subscribers beyond the limit, nothing else.
        wait_until(lambda: publisher.status_fields()["live_refused"] == 7, 10, "7 refused requests")
        assert publisher.subscribers["images"] == MAX_SUBSCRIBERS
        reader = crowd[0]
        for socket in crowd[1:]:
            socket.close(0)  # the queues of subscribers that never read go with their connections
        group.released.set()
        seen: list[int] = []

        def received_all() -> bool:
            while reader.poll(0):
                batch = wire.decode(reader.recv_multipart())
                reader.send(wire.ack(batch.seq))
                seen.extend(int(p) for p in batch.arrays["position"])
            return len(seen) == BATCHES

        wait_until(received_all, 60, "the first subscriber to get every batch")
        assert publisher._thread.is_alive()
    finally:
        publisher.close()
        for socket in sockets:
            socket.close(0)
