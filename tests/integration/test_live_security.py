"""The live stream as a hostile peer meets it: with [security] on a keyless peer,
a stranger's key or another role's key never completes the handshake while the viewer's and the
operator's do; a crowd that subscribes and never reads is dropped and the real reader gets the
stream; a publisher advertised in the kvstore announcing a 16000 x 16000 scan is refused and
counted by ``sectorflow view``, which ends with its exit code instead of a MemoryError; a publisher
with a backlog does not starve the others."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import zmq
from handshake import REFUSED, SUCCEEDED, Curve, handshake
from keyring import Keyring
from kvstore_support import start_kvstore
from support import Processes, wait_until

from sectorflow.kvstore import Client
from sectorflow.live import frames, wire
from sectorflow.live.publisher import MAX_SUBSCRIBERS, LivePublisher
from sectorflow.protocol import ServiceStatus, status_key
from sectorflow.security.options import live_curve

SYNC_S = 30.0  # deadline of waits; a failure guard, not a speed requirement
SCAN = 3
SCAN_SIDE = 100


class EndlessGroup:
    """The NodeGroup's side of the publisher: one counted frame of scan 3 per take, until stopped."""

    live_dropped = 0

    def __init__(self) -> None:
        self.taken = 0
        self.stopped = threading.Event()

    def take_live(self) -> dict[str, object]:
        n = 0 if self.stopped.is_set() or self.taken >= SCAN_SIDE * SCAN_SIDE else 1
        position = np.arange(self.taken, self.taken + n, dtype=np.uint64)
        self.taken += n
        return {"scan": np.full(n, SCAN, np.uint32), "scan_x": np.full(n, SCAN_SIDE, np.uint32),
                "scan_y": np.full(n, SCAN_SIDE, np.uint32), "position": position,
                "columns": {"bright_field": np.ones(n, np.float32), "dark_field": np.zeros(n, np.float32),
                            "com_x": np.zeros(n, np.float32), "com_y": np.zeros(n, np.float32)},
                "offsets": np.array([0, 3][: n + 1], dtype=np.uint64), "events": np.arange(3 * n, dtype=np.uint32),
                "dropped": 0}


def advertise(config, uid: str, fields: dict[str, object]) -> Client:
    """A status of NodeGroup ``uid`` carrying ``fields``, as the NodeGroup service publishes it."""
    client = Client.from_config(config, name=f"advertiser {uid}", role="nodegroup")
    client.set(status_key("nodegroup", uid), ServiceStatus(state="idle", extra=fields).encode(), 0.0)
    return client


def test_with_security_on_only_viewer_and_operator_keys_complete_the_handshake(
        make_config: Callable, tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "keys")
    stranger = keyring.stranger("mallory", "viewer")
    config, _ = make_config(security={"enabled": True, "key_dir": str(keyring.beamline)})
    group = EndlessGroup()
    publisher = LivePublisher(group, "ng-0", "127.0.0.1", "127.0.0.1", (8, 8), rate_hz=20.0, hwm=4, stall_s=5.0,
                              curve=live_curve(config))
    try:
        assert publisher.status_fields()["live_key"] == keyring.public("nodegroup")
        server = keyring.public("nodegroup")
        for endpoint in publisher.endpoints.values():
            assert handshake(endpoint, zmq.DEALER, None) == REFUSED  # no key at all
            mallory = Curve(*_pair(stranger / "viewer" / "mallory.key_secret"), server_key=server)
            assert handshake(endpoint, zmq.DEALER, mallory) == REFUSED
            for role in ("producer", "nodegroup", "aggregator"):
                assert handshake(endpoint, zmq.DEALER, Curve(*keyring.pair(role), server_key=server)) == REFUSED
            for role in ("viewer", "operator"):
                assert handshake(endpoint, zmq.DEALER, Curve(*keyring.pair(role), server_key=server)) == SUCCEEDED
        # 40 keyless subscribers: none gets a slot, each refusal is counted.
        context = zmq.Context()
        crowd = []
        try:
            for _ in range(40):
                socket = context.socket(zmq.DEALER)
                socket.linger = 0
                socket.connect(publisher.endpoints["images"])
                with contextlib.suppress(zmq.Again):  # a keyless peer may have no connection to queue on
                    socket.send(wire.SUBSCRIBE, zmq.DONTWAIT)
                crowd.append(socket)
            wait_until(lambda: publisher.status_fields()["live_handshakes_refused"] >= 40 + 2 * 5, SYNC_S,
                       "every keyless handshake refused and counted")
            assert publisher.subscribers == {"images": 0, "frames": 0}
        finally:
            context.destroy(linger=0)
    finally:
        publisher.close()


def _pair(path: Path) -> tuple[str, str]:
    from sectorflow.security import read_certificate

    certificate = read_certificate(str(path))
    return certificate.public_key, certificate.secret_key


def test_a_crowd_that_never_reads_is_dropped_and_the_reader_gets_the_stream(
        make_config: Callable, processes: Processes) -> None:
    server = start_kvstore(make_config, processes, analysis={"live_stall_s": 1.0})
    config = server.config
    group = EndlessGroup()
    publisher = LivePublisher(group, "ng-0", "127.0.0.1", "127.0.0.1", (8, 8), rate_hz=20.0, hwm=4,
                              stall_s=config.analysis.live_stall_s)
    advertiser = advertise(config, "ng-0", publisher.status_fields())
    context = zmq.Context()
    got: list[int] = []
    stop = threading.Event()
    try:
        crowd = []
        for _ in range(40):  # more than the slots: they subscribe, then never read
            socket = context.socket(zmq.DEALER)
            socket.linger = 0
            socket.setsockopt(zmq.RCVHWM, 1)
            socket.connect(publisher.endpoints["frames"])
            socket.send(wire.SUBSCRIBE)
            crowd.append(socket)
        wait_until(lambda: publisher.subscribers["frames"] == MAX_SUBSCRIBERS, SYNC_S, "the crowd in every slot")

        def read() -> None:
            for frame in frames(config, scan=SCAN, timeout_s=120):
                got.append(frame.position)
                if stop.is_set():
                    return

        reader = threading.Thread(target=read)
        reader.start()
        wait_until(lambda: publisher.refused >= 1, SYNC_S, "the reader refused while the crowd holds the slots")
        assert not got
        # The counted frames flow: the crowd, reading none, is dropped; the reader takes a slot.
        wait_until(lambda: len(got) >= 20, 60, "the reader to receive frames")
        stop.set()
        reader.join(SYNC_S)
        assert publisher.subscribers_dropped == MAX_SUBSCRIBERS
        assert publisher.status_fields()["live_subscribers_dropped"] == MAX_SUBSCRIBERS
        assert got == sorted(got) and len(set(got)) == len(got)
    finally:
        stop.set()
        group.stopped.set()
        context.destroy(linger=0)
        publisher.close()
        advertiser.close()


HOSTILE_HEADER = {"v": wire.VERSION, "uid": "evil", "scan": 9, "scan_shape": [16000, 16000],
                  "frame_shape": [576, 576], "end": False, "seq": 0,
                  "columns": ["bright_field", "dark_field", "com_x", "com_y"], "detectors": ["bright_field", "dark_field"]}


def test_a_hostile_publishers_huge_scan_shape_is_refused_and_counted_by_view(
        make_config: Callable, processes: Processes) -> None:
    server = start_kvstore(make_config, processes)
    config, path = server.config, server.path
    context = zmq.Context()
    evil = context.socket(zmq.ROUTER)
    evil.linger = 0
    port = evil.bind_to_random_port("tcp://127.0.0.1")
    advertiser = advertise(config, "evil", {"live_images": f"tcp://127.0.0.1:{port}",
                                            "live_frames": f"tcp://127.0.0.1:{port}"})
    # And one whose endpoint is no endpoint: skipped, counted, never a crash.
    garbage = advertise(config, "garbage", {"live_images": "not an endpoint", "live_frames": "tcp://"})
    view = subprocess.Popen([sys.executable, "-m", "sectorflow", "view", "--config", str(path), "--timeout", "8"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert evil.poll(SYNC_S * 1000), "the viewer subscribed"
        identity, request = evil.recv_multipart()
        assert request == wire.SUBSCRIBE
        import json

        one = [np.zeros(1, dtype) for dtype in ("<u8", "<u8", "<f4", "<f4", "<f4", "<f4")]  # position, offsets, 4 columns
        parts = [wire.IMAGES, json.dumps(HOSTILE_HEADER).encode(), *(a.tobytes() for a in one), b""]
        for seq in range(3):
            evil.send_multipart([identity, *parts[:1], json.dumps({**HOSTILE_HEADER, "seq": seq}).encode(), *parts[2:]])
        # A scan of allowed size naming a thousand columns, each a detector: the reader would make an image of each.
        names = [f"d{i}" for i in range(1000)]
        many = {**HOSTILE_HEADER, "scan_shape": [2, 2], "seq": 3, "columns": names, "detectors": names}
        evil.send_multipart([identity, wire.IMAGES, json.dumps(many).encode(), *(b"\0" * 4 for _ in range(1000)), b""])
        out, err = view.communicate(timeout=60)
    finally:
        if view.poll() is None:
            view.kill()
            view.communicate()
        context.destroy(linger=0)
        advertiser.close()
        garbage.close()
    assert view.returncode == 1, err
    assert "Traceback" not in err and "MemoryError" not in err, err
    assert "beyond the 4194304 of [limits] max_scan_positions" in err
    assert "live: 5 refused on the images stream" in err  # 4 messages and the garbage publisher


def test_a_publisher_with_a_backlog_does_not_starve_the_others(make_config: Callable, processes: Processes) -> None:
    """A reader slower than one publisher's rate still reads every publisher in turn: reading the first
    ready one each time left a second publisher's messages unread (and unacknowledged) for as long as
    the first had a backlog, until it dropped the reader as stalled and the view missed its frames and
    its scan's end (seen as a live view of 96 of 192 positions under CI load)."""
    from sectorflow.live.subscriber import LiveStream

    server = start_kvstore(make_config, processes)
    context = zmq.Context()
    publishers = {}
    advertisers = []
    for uid in ("busy", "quiet"):
        socket = context.socket(zmq.ROUTER)
        socket.linger = 0
        port = socket.bind_to_random_port("tcp://127.0.0.1")
        publishers[uid] = socket
        advertisers.append(advertise(server.config, uid, {"live_images": f"tcp://127.0.0.1:{port}"}))
    stream = LiveStream(server.config, wire.IMAGES)
    try:
        identities = {}
        for uid, socket in publishers.items():
            # A status the reader's replica did not hold yet is found at its next look.
            wait_until(lambda socket=socket: stream.discover() or socket.poll(100), SYNC_S, f"the reader to subscribe to {uid}")
            identities[uid], request = socket.recv_multipart()
            assert request == wire.SUBSCRIBE

        def batch(uid: str) -> wire.Batch:
            arrays = {"position": np.zeros(1, np.uint64), "offsets": np.array([0, 0], np.uint64),
                      "events": np.zeros(0, np.uint32)}
            return wire.Batch(wire.IMAGES, uid, SCAN, (2, 2), (4, 4), False, arrays)

        backlog = 40
        for seq in range(backlog):
            publishers["busy"].send_multipart([identities["busy"], *wire.encode(batch("busy"), seq)])
        wait_until(lambda: stream.poller.poll(0), SYNC_S, "the busy publisher's backlog to arrive")
        publishers["quiet"].send_multipart([identities["quiet"], *wire.encode(batch("quiet"), 0)])
        wait_until(lambda: len(stream.poller.poll(0)) == 2, SYNC_S, "both publishers' messages to be readable")
        read = [stream.receive(1000).uid for _ in range(3)]
        assert "quiet" in read, read  # read in turn, not after the busy one's 40
        # What the quiet publisher hears back (its subscription renewed, then the acknowledgement).
        heard = wait_until(lambda: publishers["quiet"].poll(0) and publishers["quiet"].recv_multipart()[1] == wire.ack(0),
                           SYNC_S, "the reader to acknowledge the quiet publisher's message")
        assert heard
    finally:
        stream.close()
        context.destroy(linger=0)
        for advertiser in advertisers:
            advertiser.close()
