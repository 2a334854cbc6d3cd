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
from sectorflow.protocol import STATE_IDLE, STATE_STOPPED, STATE_STOPPING, STATE_STREAMING
from sectorflow.service import ServiceState

from . import asi_wire
from .in_order import InOrder, Released
from .server import DROPPED, ENDED, PENDING, READ, AcquisitionServer
from .slot import Delivery
from .status import StatusPublisher, bridge_status

log = logging.getLogger(__name__)

#: Longest wait for the live stream before the scans' clocks are looked at again, seconds.
RECEIVE_WAIT_S = 0.1


@dataclass
class BridgeCounters:
    """What the bridge did, over its life (logged per scan and at the end)."""

    scans_served: int = 0  # acquisitions a client read whole
    scans_unserved: int = 0  # scans no client read whole: none at their start, or each went or was dropped
    positions_empty: int = 0  # positions sent empty: never came, or came too late
    frames_late: int = 0  # frames that came after their position was given up, left out
    # Frames never queued for a client, per client (the server counts what its clients read and
    # what it discarded of what it queued: AcquisitionServer.delivered, discarded_dropped, discarded_gone):
    frames_unsent: int = 0  # of scans with no client at their start, or after a client went
    frames_dropped: int = 0  # of a scan after a client of it was dropped (too slow, or read nothing)
    # The last scan over, for its account (operations/scan_account.py): its number, whether a
    # client read it whole, its positions and how many of them were sent empty.
    last_scan: int = -1
    last_scan_served: bool = False
    last_scan_positions: int = 0
    last_scan_empty: int = 0


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
    started: bool = False
    clients: list[int] = field(default_factory=list)  # the client connections it started on
    sending: list[int] = field(default_factory=list)  # those of them it is still sent to
    dropped: int = 0  # its clients dropped during it (each misses the rest of it)
    gone: int = 0  # its clients that went during it


class FrameSource(Protocol):
    """Where the bridge's frames come from: the live stream's ``frames`` topic (``LiveStream``)."""

    publishers: set[str]  # uids of the NodeGroups subscribed to

    def receive(self, timeout_ms: int) -> wire.Batch | None: ...

    def close(self) -> None: ...


class Bridge:
    """Reads the live stream (or ``source``) and serves it on ``server``; ``run`` until ``stop`` is set.

    :raises SectorflowError: no kvstore answers (``source`` None: the live stream of ``config``).
    """

    def __init__(self, config: Config, server: AcquisitionServer, source: FrameSource | None = None,
                 publisher: StatusPublisher | None = None) -> None:
        self.settings = config.libertem
        self.server = server
        self.stream: FrameSource = source if source is not None else LiveStream(config, wire.FRAMES)
        self.publisher = publisher
        self.counters = BridgeCounters()
        self.state = ServiceState(log)
        self._scans: dict[int, _Scan] = {}  # open scans, in the order their first frame came
        # Scans sent whole, in order, until a client has read one whole or none of its clients can.
        self._reading: dict[int, _Scan] = {}
        self._finished: set[int] = set()

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop``; the status says stopped at the end (the counters' last word)."""
        self.state.enter(STATE_IDLE)
        try:
            while not stop.is_set():
                batch = self.stream.receive(int(RECEIVE_WAIT_S * 1000))
                now = time.monotonic()
                if batch is not None:
                    self._take(batch, now)
                self._serve(now)
                self._settle()
                self._publish(now)
        finally:
            self.state.enter(STATE_STOPPING)
            self._settle(stopping=True)
            self.stream.close()
            self.state.enter(STATE_STOPPED)
            self._publish(time.monotonic(), force=True)

    def _publish(self, now: float, force: bool = False) -> None:
        scan = next(iter(self._reading), next(iter(self._scans), None))
        status = bridge_status(self.counters, self.server, scan)
        if self.state.state in (STATE_IDLE, STATE_STREAMING):
            self.state.enter(status.state, why=f"scan {status.scan}")
        else:
            status.state = self.state.state
        if self.publisher is not None:
            self.publisher.publish(status, now, force)

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
            scan.clients = self.server.clients()
            scan.sending = list(scan.clients)
            if scan.clients:
                self._to_clients(scan, [asi_wire.acquisition_start(sequence, scan.scan_shape, scan.frame_shape),
                                        asi_wire.scan_start(sequence)], Delivery(), None)
            else:
                log.warning("libertem: scan %d not served: no LiberTEM client connected at its start", scan.number)
        empty = released.empty
        if scan.sending:
            parts: list[bytes] = []
            for indptr, indices in _chunks(released, self.settings.chunk_bytes):
                parts += asi_wire.array_chunk(indptr, indices)
            mark = None
            if scan.order.done:
                parts += [asi_wire.scan_end(sequence), asi_wire.acquisition_end(sequence)]
                mark = sequence  # read whole by a client once it has read this
            self._to_clients(scan, parts, Delivery(released.frames - empty, released.frames), mark)
        self.counters.positions_empty += empty
        # What was queued the server counts, per client: read, or discarded with its client. Each
        # client the scan started on that is no longer sent to misses these frames.
        frames = released.frames - empty
        self.counters.frames_dropped += frames * scan.dropped
        self.counters.frames_unsent += frames * (scan.gone + (not scan.clients))

    def _to_clients(self, scan: _Scan, parts: list[bytes], carries: Delivery, mark: int | None) -> None:
        for connection, sent in self.server.send(scan.sending, parts, carries, mark).items():
            if sent in (DROPPED, ENDED):
                scan.sending.remove(connection)
                scan.dropped += sent == DROPPED
                scan.gone += sent == ENDED
                log.warning("libertem: scan %d: its client of connection %d %s, the rest is not sent to it",
                            scan.number, connection,
                            "was disconnected (read too slowly)" if sent == DROPPED else "went")

    def _finish(self, scan: _Scan) -> None:
        del self._scans[scan.number]
        self._finished.add(scan.number)
        self.counters.frames_late += scan.order.late
        self._reading[scan.number] = scan

    def _settle(self, stopping: bool = False) -> None:
        """Counts the scans sent whole as served once a client has read one whole, unserved once
        none of its clients can (or the bridge stops first); in order, so that the last one
        counted is the last one sent."""
        while self._reading:
            scan = next(iter(self._reading.values()))
            outcomes = {self.server.outcome(connection, scan.number) for connection in scan.sending}
            if READ not in outcomes and PENDING in outcomes and not stopping:
                return
            del self._reading[scan.number]
            self.server.forget(scan.number)
            self._count(scan, READ in outcomes)

    def _count(self, scan: _Scan, served: bool) -> None:
        order = scan.order
        if served:
            self.counters.scans_served += 1
        else:
            self.counters.scans_unserved += 1
        self.counters.last_scan = scan.number
        self.counters.last_scan_served = served
        self.counters.last_scan_positions = order.positions
        self.counters.last_scan_empty = order.empty
        log.info("libertem: scan %d %s: %d of %d positions sent empty (never came in time), %d late frames left out",
                 scan.number, "served" if served else "not served", order.empty, order.positions,
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
