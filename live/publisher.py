"""A NodeGroup's live publisher: its counted frames, as partial virtual images and as events, on
two ZeroMQ ROUTER sockets a few times a second (live/SPEC.md).

Counting never waits for a subscriber: the counting threads only append to the NodeGroup's live
feed (C++, bounded, ``take_live``); this thread takes the feed at ``[analysis] live_rate_hz`` and
sends to each subscriber without blocking. A subscriber is a DEALER that said ``subscribe``; each
keeps at most ``[analysis] live_hwm`` messages queued, and a message its full queue refuses
(``ZMQ_ROUTER_MANDATORY`` makes the send fail instead of dropping unseen) is lost for that
subscriber alone and counted here, in frames: ``images_dropped`` and ``frames_dropped``, published
in the NodeGroup's status (``live_images_dropped``, ``live_frames_dropped``, and the feed's own
``live_feed_dropped``). A subscriber whose connection is gone is forgotten at its next send.

A slot is held by reading: every message carries a sequence number and a subscriber acknowledges
what it read (``ack <seq>``). One that has left a message unacknowledged for ``stall_s`` without
acknowledging any newer one is dropped (its slot freed, counted: ``live_subscribers_dropped``); it may
subscribe again. With ``[security]`` on both sockets are CURVE servers holding the NodeGroup's key,
and only the viewer and operator keys pass the handshake (a ZAP handler on this publisher's own
context); failed handshakes are counted (``live_handshakes_refused``).

What a peer sends here is a request of a few bytes: anything longer is cut off by ZeroMQ
(``MAX_REQUEST_BYTES``), anything but subscribe/unsubscribe/ack, and a subscription beyond
``MAX_SUBSCRIBERS`` per stream, is refused and counted (``live_refused`` in the status).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq
from zmq.auth.thread import ThreadAuthenticator

from . import wire

log = logging.getLogger(__name__)

#: Longest request a peer may send ("unsubscribe" and its frame headers fit).
MAX_REQUEST_BYTES = 64
#: The same under CURVE: ZeroMQ applies the limit to the handshake's commands too, and INITIATE
#: (vouch and metadata) is about 300 bytes; 256 fails every handshake (measured), 512 passes.
MAX_CURVE_REQUEST_BYTES = 512
#: Subscribers per stream: each may hold live_hwm messages queued here.
MAX_SUBSCRIBERS = 32
#: Requests handled per update, so that a flood of them cannot hold the updates back.
REQUESTS_PER_TICK = 1000
#: ZAP domain of the live sockets (the allowlist the authenticator checks).
DOMAIN = "live"
_HANDSHAKE_FAILED = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                     | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


@dataclass
class _Peer:
    """What a subscriber has been sent and has acknowledged."""

    last_sent: int = -1  # sequence number of the newest message sent to it
    acked: int = -1  # the newest it acknowledged
    pending_since: float | None = None  # since when it has owed an acknowledgement, None: owes none


class _Allowlist:
    """The ZAP callback: a CURVE key is admitted if the allowlist names it (key -> "<role>/<name>")."""

    def __init__(self, peers: dict[str, str]) -> None:
        self.peers = {key.encode(): identity for key, identity in peers.items()}

    def callback(self, domain: str, key: bytes) -> bool:
        return domain == DOMAIN and key in self.peers


class LivePublisher:
    """Publishes ``group``'s live feed; binds both sockets on ``host`` (ports from the OS).

    :param group: the C++ NodeGroup (made with ``live=True``).
    :param uid: the NodeGroup's uid, in every message.
    :param bind_host: the address to bind (``[nodegroup] host``; a wildcard binds every interface).
    :param host: the address subscribers connect to, advertised in the endpoints.
    :param frame_shape: (rows, cols) of the detector frame.
    :param rate_hz: updates per second, at most.
    :param hwm: messages queued per subscriber before sends fail (and are counted).
    :param stall_s: a subscriber that acknowledges nothing newer for this long is dropped.
    :param curve: the NodeGroup's ``CurveServer`` for the live domain (security.options.live_curve);
        None or off: plain TCP.
    :param detectors: which of the feed's kernel columns are the virtual detectors' (the images
        header's ``detectors``: a reader makes an image of each).
    """

    def __init__(self, group: Any, uid: str, bind_host: str, host: str, frame_shape: tuple[int, int],
                 rate_hz: float, hwm: int, stall_s: float = 10.0, curve: Any = None,
                 detectors: tuple[str, ...] = ()) -> None:
        self.group = group
        self.uid = uid
        self.detectors = detectors
        self.frame_shape = frame_shape
        self.period_s = 1.0 / rate_hz
        self.images_dropped = 0  # frames whose image message a subscriber's full queue refused
        self.frames_dropped = 0  # frames whose events message was refused
        self.refused = 0  # requests refused: unknown, or a subscription beyond MAX_SUBSCRIBERS
        self.stall_s = stall_s
        self.subscribers_dropped = 0  # subscribers dropped for not reading (their slots freed)
        self.handshakes_refused = 0  # CURVE handshakes that failed: no key, or a key not admitted
        self._peers: dict[bytes, dict[bytes, _Peer]] = {wire.IMAGES: {}, wire.FRAMES: {}}  # by identity
        self._seq = {wire.IMAGES: 0, wire.FRAMES: 0}
        # A context of its own: its ZAP handler answers for these sockets alone.
        self._context = zmq.Context()
        self._auth: ThreadAuthenticator | None = None
        self.server_key = ""
        secured = curve is not None and curve.enabled
        if secured:
            self._auth = ThreadAuthenticator(self._context)
            self._auth.start()
            self._auth.configure_curve_callback(DOMAIN, _Allowlist(dict(curve.peers)))
            self.server_key = curve.public_key
        self._sockets: dict[bytes, zmq.Socket] = {}
        self._monitors: list[zmq.Socket] = []
        self.endpoints: dict[str, str] = {}
        for topic in (wire.IMAGES, wire.FRAMES):
            socket = self._context.socket(zmq.ROUTER)
            socket.setsockopt(zmq.LINGER, 0)
            socket.setsockopt(zmq.SNDHWM, hwm)
            socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
            socket.setsockopt(zmq.MAXMSGSIZE, MAX_CURVE_REQUEST_BYTES if secured else MAX_REQUEST_BYTES)
            if secured:
                socket.curve_server = True
                socket.curve_publickey = curve.public_key.encode()
                socket.curve_secretkey = curve.secret_key.encode()
                socket.zap_domain = DOMAIN.encode()
                self._monitors.append(socket.get_monitor_socket(_HANDSHAKE_FAILED))
            port = socket.bind_to_random_port(f"tcp://{bind_host}")
            self._sockets[topic] = socket
            self.endpoints[topic.decode()] = f"tcp://{host}:{port}"
        self._ended: queue.SimpleQueue[tuple[int, tuple[int, int]]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"live {uid}", daemon=True)
        self._thread.start()

    def scan_finished(self, scan: int, scan_shape: tuple[int, int]) -> None:
        """The NodeGroup handed over ``scan``: after its last frames, subscribers are told it ended."""
        self._ended.put((scan, scan_shape))

    @property
    def subscribers(self) -> dict[str, int]:
        """Subscribers per stream ("images", "frames")."""
        return {topic.decode(): len(peers) for topic, peers in self._peers.items()}

    def status_fields(self) -> dict[str, Any]:
        """What the NodeGroup's status says of the live stream: where it is (and the key it proves,
        with security on) and what it dropped and refused."""
        return {"live_images": self.endpoints["images"], "live_frames": self.endpoints["frames"],
                "live_key": self.server_key, "live_subscribers_dropped": self.subscribers_dropped,
                "live_handshakes_refused": self.handshakes_refused,
                "live_images_dropped": self.images_dropped, "live_frames_dropped": self.frames_dropped,
                "live_feed_dropped": int(self.group.live_dropped),
                "live_images_subscribers": self.subscribers["images"],
                "live_frames_subscribers": self.subscribers["frames"], "live_refused": self.refused}

    def close(self) -> None:
        """Stop the thread and close the sockets (idempotent)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for monitor in self._monitors:
            monitor.close(0)
        self._monitors.clear()
        for socket in self._sockets.values():
            socket.close(0)
        self._sockets.clear()
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
        self._context.destroy(linger=0)

    def _run(self) -> None:
        # The wait bounds the update rate; a stop ends it at once.
        self._tick_safely()  # subscriptions already made count at once
        while not self._stop.wait(self.period_s):
            self._tick_safely()
        self._tick_safely()  # what was counted before the stop

    def _tick_safely(self) -> None:
        try:
            self._tick()
        except Exception:  # noqa: BLE001 - the live view must never take the NodeGroup down
            log.exception("nodegroup %s: live update failed; the next one is tried", self.uid)

    def _tick(self) -> None:
        self._count_refused_handshakes()
        now = time.monotonic()
        for topic, socket in self._sockets.items():
            self._take_requests(socket, self._peers[topic], now)
            self._drop_stalled(topic, now)
        ended = []
        while True:
            try:
                ended.append(self._ended.get_nowait())
            except queue.Empty:
                break
        batch = self.group.take_live()
        for scan in np.unique(batch["scan"]):
            self._publish_scan(batch, int(scan))
        for scan, scan_shape in ended:
            self._send(wire.Batch(wire.IMAGES, self.uid, scan, scan_shape, self.frame_shape, True, _empty_images()))
            self._send(wire.Batch(wire.FRAMES, self.uid, scan, scan_shape, self.frame_shape, True, _empty_frames()))

    def _publish_scan(self, batch: dict[str, np.ndarray], scan: int) -> None:
        rows = np.flatnonzero(batch["scan"] == scan)
        scan_shape = (int(batch["scan_y"][rows[0]]), int(batch["scan_x"][rows[0]]))
        offsets = batch["offsets"]
        pieces = [batch["events"][offsets[i]:offsets[i + 1]] for i in rows]
        events = np.concatenate(pieces) if pieces else np.zeros(0, np.uint32)
        own_offsets = np.zeros(len(rows) + 1, dtype=np.uint64)
        np.cumsum([len(p) for p in pieces], out=own_offsets[1:])
        columns = batch["columns"]
        images = {name: values[rows] for name, values in columns.items()}
        images["position"] = batch["position"][rows]
        self._send(wire.Batch(wire.IMAGES, self.uid, scan, scan_shape, self.frame_shape, False,
                              {**images, "offsets": own_offsets, "events": events}, columns=tuple(columns),
                              detectors=self.detectors))
        self._send(wire.Batch(wire.FRAMES, self.uid, scan, scan_shape, self.frame_shape, False,
                              {"position": images["position"], "offsets": own_offsets, "events": events}))

    def _send(self, batch: wire.Batch) -> None:
        seq = self._seq[batch.topic]
        self._seq[batch.topic] = seq + 1
        parts = wire.encode(batch, seq)
        socket, peers = self._sockets[batch.topic], self._peers[batch.topic]
        now = time.monotonic()
        for peer, state in list(peers.items()):
            try:
                socket.send_multipart([peer, *parts], flags=zmq.DONTWAIT)
                state.last_sent = seq
                if state.pending_since is None:
                    state.pending_since = now
            except zmq.Again:  # this subscriber's queue is full: lost for it alone, counted
                if batch.topic == wire.IMAGES:
                    self.images_dropped += batch.frames
                else:
                    self.frames_dropped += batch.frames
            except zmq.ZMQError as error:
                # EHOSTUNREACH: its connection is gone. Any other error is this peer's alone: the
                # others still get the batch.
                peers.pop(peer, None)
                log.info("nodegroup %s: live %s subscriber left (%s)", self.uid, batch.topic.decode(), error)

    def _count_refused_handshakes(self) -> None:
        for monitor in self._monitors:
            while monitor.poll(0):
                monitor.recv_multipart()  # an event of _HANDSHAKE_FAILED, the only ones monitored
                self.handshakes_refused += 1
                if self.handshakes_refused == 1:
                    log.warning("nodegroup %s: a live subscriber failed the CURVE handshake (no key, or one "
                                "not admitted); further ones are counted", self.uid)

    def _drop_stalled(self, topic: bytes, now: float) -> None:
        """Free the slots of subscribers that have not read for stall_s: a crowd that never reads
        must not keep the viewer out."""
        peers = self._peers[topic]
        for identity, state in list(peers.items()):
            if state.pending_since is not None and now - state.pending_since > self.stall_s:
                del peers[identity]
                self.subscribers_dropped += 1
                if self.subscribers_dropped == 1:
                    log.warning("nodegroup %s: a live %s subscriber read nothing for %g s and was dropped; further "
                                "ones are counted", self.uid, topic.decode(), self.stall_s)

    def _take_requests(self, socket: zmq.Socket, peers: dict[bytes, _Peer], now: float) -> None:
        """Apply the requests that came since the last call: [identity, b"subscribe"],
        [identity, b"unsubscribe"] or [identity, b"ack <seq>"]; anything else, and a subscriber
        beyond MAX_SUBSCRIBERS, is refused and counted."""
        for _ in range(REQUESTS_PER_TICK):
            try:
                identity, *rest = socket.recv_multipart(zmq.DONTWAIT)
            except zmq.Again:
                return
            acked = wire.parse_ack(rest[0]) if len(rest) == 1 else None
            if rest == [wire.SUBSCRIBE] and (identity in peers or len(peers) < MAX_SUBSCRIBERS):
                peers.setdefault(identity, _Peer())  # a renewal changes nothing: only reading holds a slot
            elif rest == [wire.UNSUBSCRIBE]:
                peers.pop(identity, None)
            elif acked is not None:
                state = peers.get(identity)
                if state is not None and acked > state.acked:  # an ack of a dropped subscriber is moot
                    state.acked = min(acked, state.last_sent)
                    state.pending_since = None if state.acked >= state.last_sent else now
            else:
                self.refused += 1
                if self.refused == 1:
                    log.warning("nodegroup %s: live request refused (%d part(s), %s); further ones are counted",
                                self.uid, len(rest), "a subscriber too many" if rest == [wire.SUBSCRIBE]
                                else "not subscribe or unsubscribe")


def _empty_images() -> dict[str, np.ndarray]:
    # The end of a scan names no columns: a reader keeps the images it has.
    return {"position": np.zeros(0, np.uint64), "offsets": np.zeros(1, np.uint64), "events": np.zeros(0, np.uint32)}


def _empty_frames() -> dict[str, np.ndarray]:
    return {"position": np.zeros(0, np.uint64), "offsets": np.zeros(1, np.uint64), "events": np.zeros(0, np.uint32)}
