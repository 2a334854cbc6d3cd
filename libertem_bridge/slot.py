"""One LiberTEM client of the bridge: its socket, the bytes queued for it and the thread that writes
them, and how much of them it has read (libertem_bridge/SPEC.md, "Clients"). What is queued is
counted as sent once the client has read it, never when the socket took it: a client that never
reads gets a small scan into the kernel's buffers whole."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from .peers import SocketTable, unsent

log = logging.getLogger(__name__)

#: Why a client's slot ended: the bridge disconnected it (it read too slowly, or nothing within the
#: deadline), or the client went (closed, or its socket failed).
DROPPED, GONE = "dropped", "gone"


@dataclass
class Delivery:
    """What queued bytes carry for a client, counted when it has read them or when they are
    discarded with it."""

    frames: int = 0  # counted frames with their events
    positions: int = 0  # positions, with events or empty

    def add(self, other: Delivery) -> None:
        self.frames += other.frames
        self.positions += other.positions


@dataclass
class Totals:
    """What every client of a server got, over the server's life."""

    delivered: Delivery = field(default_factory=Delivery)  # read whole by a client
    discarded_dropped: Delivery = field(default_factory=Delivery)  # queued for a client then dropped, unread
    discarded_gone: Delivery = field(default_factory=Delivery)  # queued for a client that went, unread
    bytes_read: int = 0  # by clients, from their sockets


@dataclass
class _Part:
    end: int  # the client's stream offset just after it
    carries: Delivery
    mark: int | None  # what the bridge learns once it is read (a scan's number, on its last part)


class Slot:
    """Client connection ``number`` on ``client``. Every method but ``observe`` and ``closed_by_peer``
    is called holding ``lock`` (the server's, shared by its slots)."""

    def __init__(self, number: int, client: socket.socket, local: bool, lock: threading.Lock, totals: Totals,
                 queue_bytes: int) -> None:
        self.number = number
        self.local = local  # its end is in this host's socket table (else it is known by what it acknowledged)
        self.ended: str | None = None  # DROPPED or GONE once over
        self.failed: OSError | None = None  # the writer's send failed: the server ends it as gone
        self.read_marks: set[int] = set()
        self._client = client
        self._wake = threading.Condition(lock)
        self._totals = totals
        self._queue_bytes = queue_bytes
        self._queue: deque[bytes] = deque()
        self._queued = 0  # bytes in _queue
        self._parts: deque[_Part] = deque()  # queued or written, not yet read
        self._end = 0  # stream offset after the last byte queued
        self._written = 0  # stream offset after the last byte the kernel took
        self._read = 0  # stream offset after the last byte the client read
        self._progress_at = time.monotonic()  # when it last read, or had nothing to read
        self._writer = threading.Thread(target=self._write, name=f"libertem-write-{number}", daemon=True)
        self._writer.start()

    def enqueue(self, data: bytes, carries: Delivery, mark: int | None) -> bool:
        """Queue ``data``; False (nothing queued) if the queue would pass its bound."""
        if self._queued + len(data) > self._queue_bytes:
            return False
        if self._end == self._read:
            self._progress_at = time.monotonic()  # its wait for a read starts now
        self._end += len(data)
        self._queue.append(data)
        self._queued += len(data)
        self._parts.append(_Part(self._end, carries, mark))
        self._wake.notify_all()
        return True

    @property
    def queued_mib(self) -> int:
        return self._queued >> 20

    def observe(self, table: SocketTable) -> None:
        """Counts what the client read since last time: what the kernel took, less what is still in
        this end's send buffer and in the client's receive buffer. Called without the lock."""
        with self._wake:
            written = self._written
        # This order can only count too little: bytes that cross from our buffer to the client's
        # between the two looks are taken off twice, never missed.
        in_ours = unsent(self._client)
        peer = table.peer_end(self._client)
        if peer is None and self.local:
            return  # its end has gone: what it held unread it never read
        read = written - in_ours - (peer.unread if peer is not None else 0)  # a remote client: acknowledged
        with self._wake:
            # Once it failed or ended, its socket may be closed and the two looks above worth nothing.
            if read <= self._read or self.ended or self.failed:
                return
            self._totals.bytes_read += read - self._read
            self._read = read
            self._progress_at = time.monotonic()
            while self._parts and self._parts[0].end <= read:
                part = self._parts.popleft()
                self._totals.delivered.add(part.carries)
                if part.mark is not None:
                    self.read_marks.add(part.mark)

    def stalled(self, now: float, deadline_s: float) -> bool:
        """It holds bytes it has not read, and has read none for ``deadline_s``."""
        return self._end > self._read and now - self._progress_at >= deadline_s

    def closed_by_peer(self) -> bool:
        """The client closed its end. LiberTEM never writes to the bridge: readable means closed,
        or bytes it sent that are read and ignored here. Called without the lock."""
        try:
            data = self._client.recv(4096, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if data:
            self._client.recv(len(data), socket.MSG_DONTWAIT)
            return False
        return True

    def end(self, why: str) -> None:
        """Disconnect: what it has not read is discarded, counted by ``why``."""
        if self.ended:
            return
        self.ended = why
        discarded = self._totals.discarded_dropped if why == DROPPED else self._totals.discarded_gone
        for part in self._parts:
            discarded.add(part.carries)
        self._parts.clear()
        self._queue.clear()
        self._queued = 0
        try:
            self._client.shutdown(socket.SHUT_RDWR)  # wakes a writer blocked on a full socket
        except OSError:
            pass  # already gone
        self._wake.notify_all()

    def join(self, timeout_s: float) -> None:
        self._writer.join(timeout_s)

    def _write(self) -> None:
        try:
            while True:
                with self._wake:
                    while not self._queue and not self.ended:
                        self._wake.wait()
                    if self.ended:
                        return
                    data = self._queue.popleft()
                    self._queued -= len(data)
                view = memoryview(data)
                while view:
                    sent = self._client.send(view)
                    view = view[sent:]
                    with self._wake:
                        self._written += sent
        except OSError as error:
            with self._wake:
                if not self.ended:
                    self.failed = error
        finally:
            # Closed by the one thread that writes to it, so that no send ever meets a reused fd.
            self._client.close()
