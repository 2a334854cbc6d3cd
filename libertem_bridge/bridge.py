"""The bridge: the NodeGroups' counted frames (the live stream's ``frames`` topic, read as a
viewer) served to LiberTEM-live, every scan as one asi_tpx3 acquisition (libertem_bridge/SPEC.md)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sectorflow.configs import Config
from sectorflow.live import wire
from sectorflow.live.subscriber import LiveStream

from . import asi_wire
from .in_order import InOrder, Released
from .server import AcquisitionServer

log = logging.getLogger(__name__)

#: Longest wait for the live stream before the scans' clocks are looked at again, seconds.
RECEIVE_WAIT_S = 0.1


@dataclass
class BridgeCounters:
    """What the bridge did, over its life (logged per scan and at the end)."""

    scans_served: int = 0  # acquisitions sent whole to a client
    scans_unserved: int = 0  # scans with no client at their start, or whose client went during them
    frames_sent: int = 0  # counted frames sent with their events
    positions_empty: int = 0  # positions sent empty: never came, or came too late
    frames_late: int = 0  # frames that came after their position was given up, left out
    frames_unsent: int = 0  # frames of unserved scans


@dataclass
class _Scan:
    number: int
    scan_shape: tuple[int, int]
    frame_shape: tuple[int, int]
    order: InOrder
    first_at: float
    last_at: float
    senders: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)
    connection: int = 0  # the client connection it is sent on; 0: none (unserved)
    started: bool = False


class FrameSource(Protocol):
    """Where the bridge's frames come from: the live stream's ``frames`` topic (``LiveStream``)."""

    publishers: set[str]  # uids of the NodeGroups subscribed to

    def receive(self, timeout_ms: int) -> wire.Batch | None: ...

    def close(self) -> None: ...


class Bridge:
    """Reads the live stream (or ``source``) and serves it on ``server``; ``run`` until ``stop`` is set.

    :raises SectorflowError: no kvstore answers (``source`` None: the live stream of ``config``).
    """

    def __init__(self, config: Config, server: AcquisitionServer, source: FrameSource | None = None) -> None:
        self.settings = config.libertem
        self.server = server
        self.stream: FrameSource = source if source is not None else LiveStream(config, wire.FRAMES)
        self.counters = BridgeCounters()
        self._scans: dict[int, _Scan] = {}  # open scans, in the order their first frame came
        self._finished: set[int] = set()

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                batch = self.stream.receive(int(RECEIVE_WAIT_S * 1000))
                now = time.monotonic()
                if batch is not None:
                    self._take(batch, now)
                self._serve(now)
        finally:
            self.stream.close()

    def _take(self, batch: wire.Batch, now: float) -> None:
        if batch.scan in self._finished:
            self.counters.frames_late += batch.frames
            return
        scan = self._scans.get(batch.scan)
        if scan is None:
            if batch.end and not batch.frames:
                return  # a scan that ended before we saw any of it
            rows, cols = batch.scan_shape
            scan = _Scan(batch.scan, batch.scan_shape, batch.frame_shape,
                         InOrder(rows * cols, self.settings.empty_after_s), now, now)
            self._scans[batch.scan] = scan
        scan.senders.add(batch.uid)
        offsets = batch.arrays["offsets"]
        events = batch.arrays["events"]
        for i, position in enumerate(batch.arrays["position"].tolist()):
            scan.order.add(position, events[offsets[i]:offsets[i + 1]], now)
        if batch.frames:
            scan.last_at = now
        if batch.end:
            scan.ended.add(batch.uid)

    def _serve(self, now: float) -> None:
        """Send what the oldest open scan has in order; close it when it is over."""
        while self._scans:
            scan = next(iter(self._scans.values()))
            # Over when every NodeGroup publishing said it counted all it will, or when a later
            # scan has begun and this one has had nothing for empty_after_s.
            later = len(self._scans) > 1
            closed = (self.stream.publishers | scan.senders) <= scan.ended or (
                later and now - scan.last_at >= self.settings.empty_after_s)
            released = scan.order.release(now, closed)
            if released is not None:
                self._send(scan, released)
            if not scan.order.done:
                return
            self._finish(scan)

    def _send(self, scan: _Scan, released: Released) -> None:
        sequence = scan.number
        if not scan.started:
            scan.started = True
            if self.server.connected:
                scan.connection = self.server.connection
                head = [asi_wire.acquisition_start(sequence, scan.scan_shape, scan.frame_shape),
                        asi_wire.scan_start(sequence)]
                if not self.server.send(scan.connection, head):
                    scan.connection = 0
            if not scan.connection:
                log.warning("libertem: scan %d not served: no LiberTEM client connected at its start", scan.number)
        if scan.connection:
            parts: list[bytes] = []
            for indptr, indices in _chunks(released, self.settings.chunk_bytes):
                parts += asi_wire.array_chunk(indptr, indices)
            if scan.order.done:
                parts += [asi_wire.scan_end(sequence), asi_wire.acquisition_end(sequence)]
            if not self.server.send(scan.connection, parts):
                log.warning("libertem: scan %d: its client went during the scan, the rest is not sent", scan.number)
                scan.connection = 0
        empty = released.empty
        self.counters.positions_empty += empty
        if scan.connection:
            self.counters.frames_sent += released.frames - empty
        else:
            self.counters.frames_unsent += released.frames - empty

    def _finish(self, scan: _Scan) -> None:
        del self._scans[scan.number]
        self._finished.add(scan.number)
        order = scan.order
        self.counters.frames_late += order.late
        if scan.connection:
            self.counters.scans_served += 1
        else:
            self.counters.scans_unserved += 1
        log.info("libertem: scan %d %s: %d of %d positions sent empty (never came in time), %d late frames left out",
                 scan.number, "served" if scan.connection else "not served", order.empty, order.positions,
                 order.late)


def _chunks(released: Released, chunk_bytes: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``released`` cut in consecutive chunks of at most ``chunk_bytes`` each (a bigger frame alone)."""
    indptr = released.indptr.astype(np.int64)
    # Bytes of a chunk from frame a up to frame b: header + 4 (b - a + 1) + 8 (indptr[b] - indptr[a]).
    start = 0
    frames = len(indptr) - 1
    while start < frames:
        # The largest end whose chunk fits, at least one frame.
        stop = min(frames, start + chunk_bytes // 4)  # no chunk holds more frames than this
        sizes = asi_wire.HEADER_BYTES + 4 * (np.arange(start + 1, stop + 1) - start + 1) + \
            8 * (indptr[start + 1:stop + 1] - indptr[start])
        fits = int(np.searchsorted(sizes, chunk_bytes, side="right"))
        end = start + max(1, fits)
        yield (indptr[start:end + 1] - indptr[start]).astype(np.uint32), \
            released.indices[indptr[start]:indptr[end]]
        start = end
