"""Receiving the live stream: ``subscribe`` (merged partial images of a scan) and ``frames`` (each
counted frame's electron events, for an analysis of one's own). Both discover every NodeGroup's
publisher through the kvstore (``status/nodegroup/<uid>`` fields ``live_images`` and
``live_frames``, kvstore/SPEC.md) and connect to each as it appears.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from sectorflow.analysis import PER_POSITION, Frames, Output, Plan, compute, empty_values, plan_of
from sectorflow.configs import Config, load_config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.protocol import scan_prefix
from sectorflow.protocol.scan_instrument import instrument_key
from sectorflow.protocol.scan_parts import records_of
from sectorflow.security import is_z85_key
from sectorflow.security.options import live_client_curve

from . import wire

log = logging.getLogger(__name__)

#: Merged views yielded per second, at most.
VIEW_RATE_HZ = 4.0
#: How often the kvstore is looked at for publishers that appeared, seconds.
DISCOVERY_INTERVAL_S = 1.0
#: Longest wait for the kvstore's first snapshot.
SYNC_TIMEOUT_S = 10.0
# How long a view that saw its scan complete still waits for the kvstore replica holding the scan's
# instrument record (a kvstore slow to answer under load); once synced, no record means the scan has
# none (no acquire requested it: a native receiver's).
INSTRUMENT_SYNC_S = 10.0

#: Bounds on what a publisher can make a subscriber hold: messages queued per publisher, and the
#: size of one (a NodeGroup's feed holds live_buffer_frames frames; 256 MiB is a million frames of
#: about 60 events).
RECEIVE_HWM = 100
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


@dataclass
class LiveView:
    """A scan's virtual images as counted so far, merged over its NodeGroups."""

    scan: int
    scan_shape: tuple[int, int]
    """(rows, cols) of probe positions"""
    images: dict[str, np.ndarray]
    """every per-position output of the analyses (sectorflow.analysis) by name: each virtual detector's
    image (electrons in the detector; the shipped configurations' are "bright_field" and "dark_field"),
    then "com_x", "com_y" (centre of mass minus the pattern centre, pixels), then any further
    analysis's: float64 arrays of scan_shape (and the output's own axes), NaN where not yet counted"""
    sums: dict[str, np.ndarray]
    """every per-scan output by name, summed over the frames counted so far: "diffraction",
    electrons per detector pixel (frame shape)"""
    positions_counted: int
    complete: bool
    """every position is counted, or every NodeGroup publishing said it counted all it will of the scan"""
    refused: int = 0
    """live messages this reader refused so far (not decoding whole, or shapes beyond its bounds)"""
    detectors_left_out: int = 0
    """detector arrays of messages left out as the view already held MAX_DETECTORS detectors' images
    (NodeGroups configured with different detectors)"""
    outputs: dict[str, Output] = field(default_factory=dict)
    """what each of images and sums is (unit, label), by name"""
    instrument: dict[str, dict[str, Any]] = field(default_factory=dict)
    """the scan's known instrument settings as its file's /metadata/instrument holds them ({quantity: {value,
    units, source}}, protocol/scan_instrument.py; live: from the scan's kvstore record); empty when none is known"""

    @property
    def diffraction(self) -> np.ndarray:
        """The summed pattern so far (zeros of one pixel when the analyses make none)."""
        return self.sums.get("diffraction", np.zeros((1, 1), dtype=np.int64))


@dataclass
class _ScanState:
    plan: Plan
    view: LiveView
    counted: np.ndarray  # bool per position
    senders: set[str]
    ended: set[str]


class LiveStream:
    """One DEALER per publisher of one topic the kvstore advertises, each subscribed (``subscribe``,
    ``frames`` and the LiberTEM bridge read through it)."""

    def __init__(self, config: Config, topic: bytes) -> None:
        self.config = config
        self.topic = topic
        # What a publisher may make this reader allocate: images of at most max_scan_positions and
        # patterns of the configured detector's size, whatever a header announces.
        self.max_positions = config.limits.max_scan_positions
        self.max_frame_pixels = config.detector.frame_rows * config.detector.frame_cols
        self.field = f"live_{topic.decode()}"
        self.client = Client.from_config(config, subtree="status/nodegroup/", name="live viewer")
        if not self.client.wait_synced(SYNC_TIMEOUT_S):
            self.client.close()
            raise SectorflowError(f"no kvstore server answered at {config.kvstore.address} "
                                  f"within {SYNC_TIMEOUT_S:g} s; is the stack up ('sectorflow up')?")
        self.context = zmq.Context.instance()
        self.poller = zmq.Poller()
        self.sockets: list[zmq.Socket] = []
        self.connected: set[str] = set()
        self.skipped: set[str] = set()  # uids of publishers not subscribed to (no usable key or endpoint)
        self.publishers: set[str] = set()  # uids
        self._last_read: dict[zmq.Socket, int] = {}  # when each socket was last read, by read count
        self._reads = 0
        self._discovered_at = 0.0
        self.refused = 0  # messages that did not decode (wire.decode) and publishers skipped, counted
        self._message_refusal_logged = False  # the first refused message is logged, the rest counted
        self.discover()

    def discover(self) -> None:
        self._discovered_at = time.monotonic()
        for socket in self.sockets:
            # Renewed every look: a publisher that dropped us (we read too slowly) or was full takes
            # us back; one that holds us ignores it.
            try:
                socket.send(wire.SUBSCRIBE, zmq.DONTWAIT)
            except zmq.Again:
                pass
        for (_, uid), status in self.client.statuses("nodegroup").items():
            endpoint = status.extra.get(self.field)
            if isinstance(endpoint, str) and endpoint not in self.connected:
                curve = None
                if self.config.security.enabled:
                    server_key = status.extra.get("live_key")
                    if not isinstance(server_key, str) or not is_z85_key(server_key):
                        self._skip(uid, endpoint, "advertises no live_key (a CURVE public key) while [security] is on")
                        continue
                    curve = live_client_curve(self.config, server_key)
                # One DEALER per publisher: a DEALER's message goes to one of its peers, and each
                # publisher must hear the subscription.
                socket = self.context.socket(zmq.DEALER)
                socket.setsockopt(zmq.LINGER, 0)
                if curve is not None:
                    socket.curve_serverkey = curve.server_key.encode()
                    socket.curve_publickey = curve.public_key.encode()
                    socket.curve_secretkey = curve.secret_key.encode()
                socket.setsockopt(zmq.RCVHWM, RECEIVE_HWM)
                socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
                try:
                    socket.connect(endpoint)
                except zmq.ZMQError as error:
                    socket.close(0)
                    self._skip(uid, endpoint, f"advertises an endpoint ZeroMQ cannot connect to ({error})")
                    continue
                with contextlib.suppress(zmq.Again):  # queued until connected; else renewed at the next look
                    socket.send(wire.SUBSCRIBE, zmq.DONTWAIT)
                self.poller.register(socket, zmq.POLLIN)
                self.sockets.append(socket)
                self.connected.add(endpoint)
                self.publishers.add(uid)
                log.info("live: subscribed to nodegroup %s at %s", uid, endpoint)

    def _skip(self, uid: str, endpoint: str, why: str) -> None:
        """A publisher not subscribed to: counted with the refused messages, logged once, not looked at again."""
        self.connected.add(endpoint)
        self.refused += 1
        if uid not in self.skipped:
            self.skipped.add(uid)
            log.warning("live: nodegroup %s %s: not subscribed to", uid, why)

    def receive(self, timeout_ms: int) -> wire.Batch | None:
        if time.monotonic() - self._discovered_at >= DISCOVERY_INTERVAL_S:
            self.discover()
        ready = self.poller.poll(timeout_ms)  # with no publisher yet, waits out timeout_ms for the next look
        if not ready:
            return None
        # The ready publisher read longest ago: taking the first ready one each time let a publisher
        # with a backlog (a reader slower than its rate) starve the others until they dropped this
        # reader as stalled (stall_s), and the view missed their frames and their scan's end.
        socket = min((ready_socket for ready_socket, _ in ready), key=lambda s: self._last_read.get(s, -1))
        self._reads += 1
        self._last_read[socket] = self._reads
        parts = socket.recv_multipart()
        try:
            batch = wire.decode(parts, self.max_positions, self.max_frame_pixels)
        except ValueError as error:
            self.refused += 1
            if not self._message_refusal_logged:
                self._message_refusal_logged = True
                log.warning("live: a message was refused (further ones are counted): %s", error)
            return None
        try:
            socket.send(wire.ack(batch.seq), zmq.DONTWAIT)  # what holds our slot at the publisher
        except zmq.Again:
            pass
        return batch

    def close(self) -> None:
        if self.refused:
            log.warning("live: %d refused on the %s stream (messages, and publishers not subscribed to)", self.refused,
                        self.topic.decode())
        for socket in self.sockets:
            try:
                socket.send(wire.UNSUBSCRIBE, zmq.DONTWAIT)
            except zmq.ZMQError:
                pass  # the publisher is gone or busy: it forgets us when its send fails
            socket.close(0)
        self.client.close()


def _config(config: str | Path | Config) -> Config:
    return config if isinstance(config, Config) else load_config(config)


def _deadline(timeout_s: float | None) -> float:
    return float("inf") if timeout_s is None else time.monotonic() + timeout_s


def subscribe(config: str | Path | Config, *, scan: int | None = None, timeout_s: float | None = None,
              stop: threading.Event | None = None) -> Iterator[LiveView]:
    """Yield the merged live view of a scan as its NodeGroups count it, at most VIEW_RATE_HZ times a
    second, until the scan is complete (that view is yielded last) or ``timeout_s`` passes.

    :param config: the configuration file (or a loaded Config) of the running stack.
    :param scan: the scan to follow; None: the first scan whose frames arrive.
    :param timeout_s: stop after this long (None: when the scan completes).
    :param stop: once set, the subscription ends within a receive's wait (0.1 s), so that a thread
        following the stream can be joined.
    :raises SectorflowError: no kvstore answers.
    """
    loaded = _config(config)
    plan = plan_of(loaded)  # the analyses the NodeGroups run, as this reader's configuration says
    stream = LiveStream(loaded, wire.IMAGES)
    deadline = _deadline(timeout_s)
    states: dict[int, _ScanState] = {}
    instrument = InstrumentLookup(loaded)
    followed = scan
    last_yield = 0.0
    changed = False
    try:
        while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
            wait_ms = int(max(0.0, min(0.1, deadline - time.monotonic())) * 1000)
            batch = stream.receive(wait_ms)
            if batch is not None and (followed is None or batch.scan == followed):
                if followed is None and not batch.end:
                    followed = batch.scan
                if batch.scan == followed:
                    _merge(states, batch, stream.publishers, plan)
                    changed = True
            state = states.get(followed) if followed is not None else None
            if state is None:
                continue
            state.view.instrument = instrument.of(followed, wait_s=INSTRUMENT_SYNC_S if state.view.complete else 0.0)
            state.view.refused = stream.refused
            if state.view.complete:
                yield state.view
                return
            now = time.monotonic()
            if changed and now - last_yield >= 1.0 / VIEW_RATE_HZ:
                last_yield, changed = now, False
                yield _copy(state.view)
    finally:
        instrument.close()
        stream.close()


def _merge(states: dict[int, _ScanState], batch: wire.Batch, publishers: set[str], plan: Plan) -> None:
    state = states.get(batch.scan)
    if state is None:
        rows, cols = batch.scan_shape
        scan_plan = Plan(plan.analyses, replace(plan.context, frame_shape=batch.frame_shape)).with_detectors(
            batch.detectors)
        outputs = {o.name: o for o in scan_plan.outputs()}
        images = {n: empty_values(o, rows * cols).reshape(rows, cols, *o.extra_shape)
                  for n, o in outputs.items() if o.per == PER_POSITION}
        sums = {n: empty_values(o, 0) for n, o in outputs.items() if o.per != PER_POSITION}
        view = LiveView(scan=batch.scan, scan_shape=batch.scan_shape, images=images, sums=sums, positions_counted=0,
                        complete=False, outputs=outputs)
        state = states[batch.scan] = _ScanState(scan_plan, view, np.zeros(rows * cols, dtype=bool), set(), set())
    view = state.view
    state.senders.add(batch.uid)
    positions = batch.arrays["position"].astype(np.int64)
    inside = positions < state.counted.size
    positions = positions[inside]
    _add_detectors(state, batch)
    values = {name: batch.arrays[o.live] for name, o in view.outputs.items()
              if o.live is not None and o.live in batch.arrays}
    # What the message does not carry, its frames give: each analysis's from_events.
    derived = [a for a in state.plan.analyses if a.from_events is not None
               and any(o.name not in values for o in a.outputs(state.plan.context))]
    if derived and len(positions):
        values.update(compute(derived, Frames(batch.arrays["position"], batch.arrays["offsets"], batch.arrays["events"]),
                              state.plan.context, skip_kernels=False))
    for name, data in values.items():
        if name in view.images:
            flat = view.images[name].reshape(-1, *view.images[name].shape[2:])
            flat[positions] = np.asarray(data)[inside]
        elif name in view.sums:
            view.sums[name] = view.sums[name] + np.asarray(data).reshape(view.sums[name].shape)
    state.counted[positions] = True
    view.positions_counted = int(state.counted.sum())
    if batch.end:
        state.ended.add(batch.uid)
    # Done when every position is in, or every NodeGroup streaming to us said it counted all it will.
    view.complete = bool(state.counted.all()) or (publishers | state.senders) <= state.ended


def _add_detectors(state: _ScanState, batch: wire.Batch) -> None:
    """Images for detectors a message names that the view lacks (NodeGroups configured unlike the
    first ones), up to MAX_DETECTORS; beyond, counted as left out."""
    view = state.view
    known = list(state.plan.context.detectors)
    for name in batch.detectors:
        if name in known:
            continue
        if len(known) >= wire.MAX_DETECTORS:
            view.detectors_left_out += 1
            continue
        known.append(name)
    if len(known) == len(state.plan.context.detectors):
        return
    state.plan = state.plan.with_detectors(known)
    outputs = {o.name: o for o in state.plan.outputs()}
    for name in known:
        if name not in view.images:
            view.images[name] = np.full(view.scan_shape, np.nan)
    view.images = {n: view.images[n] for n, o in outputs.items() if o.per == PER_POSITION}
    view.outputs = outputs


def _copy(view: LiveView) -> LiveView:
    return LiveView(scan=view.scan, scan_shape=view.scan_shape,
                    images={name: image.copy() for name, image in view.images.items()},
                    sums={name: values.copy() for name, values in view.sums.items()},
                    positions_counted=view.positions_counted, complete=view.complete, refused=view.refused,
                    detectors_left_out=view.detectors_left_out, outputs=dict(view.outputs),
                    instrument=view.instrument)


class InstrumentLookup:
    """The followed scan's instrument settings as its record ``scans/<n>/instrument`` gives them (as
    its file will hold them), read from a replica of the scan's subtree kept open while the view
    follows the scan, again on every pass and waited for once at the end. The record is written
    before the scan's request, but once the scan is over the kvstore folds its parts into
    ``scans/<n>/summary`` (kvstore/SPEC.md, "Folding"): a replica that syncs after a short scan's
    end (a kvstore slow under load) finds the record only there, so the scan's parts are read as
    ``records_of`` reads them, from the keys or the summary. A record that cannot be read is logged
    and shown as none."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._scan: int | None = None
        self._client: Client | None = None
        self._known: dict[str, dict[str, Any]] | None = None

    def of(self, scan: int, wait_s: float) -> dict[str, dict[str, Any]]:
        if scan != self._scan:
            self.close()
            self._scan, self._known = scan, None
            try:
                self._client = Client.from_config(self._config, subtree=scan_prefix(scan), name="live viewer")
            except SectorflowError as error:
                log.warning("scan %d: its instrument settings are not shown: %s", scan, error)
                self._known = {}
        if self._known is None and self._client is not None:
            if wait_s > 0:
                self._client.wait_synced(wait_s)
            records = records_of(self._client.subtree(scan_prefix(scan)), scan)
            refused = records.rejected.get(instrument_key(scan))
            if refused:
                log.warning("scan %d: its instrument settings are not shown: %s", scan, refused)
                self._known = {}
            elif records.instrument is not None:
                self._known = records.instrument.known()
            if self._known is not None:
                self.close()
        return self._known or {}

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


@dataclass(frozen=True)
class CountedFrame:
    """One counted frame of the live stream."""

    scan: int
    scan_shape: tuple[int, int]
    frame_shape: tuple[int, int]
    position: int
    """flat probe position, row * scan cols + col"""
    events: np.ndarray
    """ascending flat pixel indices (row * frame cols + col) of the frame's electrons, uint32"""

    def __iter__(self) -> Iterator[Any]:
        """``position, events = frame``: what an analysis needs of a frame."""
        return iter((self.position, self.events))


def frames(config: str | Path | Config, *, scan: int | None = None,
           timeout_s: float | None = None) -> Iterator[CountedFrame]:
    """Yield every counted frame of a scan as the NodeGroups count it, until every NodeGroup
    publishing said it counted all it will of the scan, or ``timeout_s`` passes.

    A consumer slower than the stream loses messages (never slowing the counting): the NodeGroups
    count what it missed (``live_frames_dropped`` in their status), and so can the consumer, from
    the positions it never saw.

    :param scan: the scan to follow; None: the first whose frames arrive.
    :raises SectorflowError: no kvstore answers.
    """
    stream = LiveStream(_config(config), wire.FRAMES)
    deadline = _deadline(timeout_s)
    followed = scan
    senders: set[str] = set()
    ended: set[str] = set()
    try:
        while time.monotonic() < deadline:
            wait_ms = int(max(0.0, min(0.1, deadline - time.monotonic())) * 1000)
            batch = stream.receive(wait_ms)
            if batch is None or (followed is not None and batch.scan != followed):
                continue
            if followed is None:
                if batch.end:
                    continue
                followed = batch.scan
            senders.add(batch.uid)
            offsets = batch.arrays["offsets"]
            for i, position in enumerate(batch.arrays["position"]):
                yield CountedFrame(batch.scan, batch.scan_shape, batch.frame_shape, int(position),
                                   batch.arrays["events"][offsets[i]:offsets[i + 1]])
            if batch.end:
                ended.add(batch.uid)
                if (stream.publishers | senders) <= ended:
                    return
    finally:
        stream.close()
