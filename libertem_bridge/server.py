"""The bridge's TCP side: one LiberTEM-live client at a time, fed from a bounded queue by a writer
thread, so that a slow or vanished client costs the bridge's reading of the live stream nothing
(libertem_bridge/SPEC.md, "Clients")."""

from __future__ import annotations

import logging
import socket
import threading
from collections import deque
from dataclasses import dataclass

from sectorflow.configs.loader import is_loopback
from sectorflow.errors import UsageError

log = logging.getLogger(__name__)

#: How often the accepting thread looks at its stop flag, seconds.
ACCEPT_POLL_S = 0.1


#: What ``send`` did with the parts: queued for the client; refused as that connection had ended
#: (or none was held); refused as the queue would pass its bound, and the client disconnected.
QUEUED, ENDED, DROPPED = "queued", "ended", "dropped"


@dataclass
class Delivery:
    """What queued parts carry for a client, counted when they are written or discarded: a client
    dropped or gone with parts still queued never got them, so they are not "sent"."""

    frames: int = 0  # counted frames with their events
    positions: int = 0  # positions, with events or empty

    def add(self, other: Delivery) -> None:
        self.frames += other.frames
        self.positions += other.positions


def parse_listen(address: str, allow_remote: bool) -> tuple[str, int]:
    """``HOST:PORT`` (port 0: the OS chooses) as (host, port).

    :raises UsageError: not HOST:PORT, or a host that is not loopback without ``allow_remote``.
    """
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen {address!r} is not HOST:PORT (e.g. 127.0.0.1:8283)")
    if not allow_remote:
        if not is_loopback(host):
            raise UsageError(f"--listen {address!r}: {host} is not a loopback address, and the asi_tpx3 stream has "
                             f"no authentication (anyone who connects reads the scans); run the bridge beside "
                             f"LiberTEM on 127.0.0.1, or pass --allow-remote on a network you trust")
    return host, int(port)


class AcquisitionServer:
    """Listens on ``host:port``; holds one client; sends it what ``send`` queued, in order.

    Every client connection has a number (``connection``); what is queued for a connection that
    has ended is discarded. A queue beyond ``queue_bytes`` disconnects the client.

    :raises OSError: the address cannot be bound (the message names it).
    """

    def __init__(self, host: str, port: int, queue_bytes: int) -> None:
        self.queue_bytes = queue_bytes
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind((host, port))
        except OSError as error:
            self._listener.close()
            raise OSError(f"cannot listen on {host}:{port} for LiberTEM: {error.strerror or error}") from None
        self._listener.listen(4)
        self._listener.settimeout(ACCEPT_POLL_S)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._lock = threading.Condition()
        self._client: socket.socket | None = None
        self.connection = 0  # number of the current client connection; 0: none yet
        self._queue: deque[tuple[int, bytes, Delivery]] = deque()
        self._queued = 0
        self._stop = threading.Event()
        self.clients_refused = 0  # a second client while one is connected
        self.clients_dropped = 0  # disconnected for reading slower than the queue allows
        self.clients_gone = 0  # connections the client closed (or that failed)
        self.bytes_sent = 0  # written to clients' sockets
        self.delivered = Delivery()  # written whole to a client's socket
        self.discarded_dropped = Delivery()  # queued for a client that was dropped for reading too slowly
        self.discarded_gone = Delivery()  # queued for a client that went (closed, or its socket failed)
        self._dropped_connection = 0  # the last connection dropped for reading too slowly
        self._threads = [threading.Thread(target=self._accept, name="libertem-accept", daemon=True),
                         threading.Thread(target=self._write, name="libertem-write", daemon=True)]
        for thread in self._threads:
            thread.start()

    @property
    def connected(self) -> bool:
        with self._lock:
            return self._client is not None

    def send(self, connection: int, parts: list[bytes], carries: Delivery | None = None) -> str:
        """Queue ``parts`` (which carry ``carries``) for client connection ``connection``: QUEUED,
        ENDED (that connection has ended) or DROPPED (the queue would pass its bound: the client is
        disconnected). What is queued counts as delivered once written whole, as discarded if its
        client is dropped or goes first."""
        size = sum(len(part) for part in parts)
        with self._lock:
            if connection != self.connection or self._client is None:
                return ENDED
            if self._queued + size > self.queue_bytes:
                self.clients_dropped += 1
                self._dropped_connection = connection
                log.warning("libertem: the client reads slower than the scans come (%d MiB queued): disconnected",
                            self._queued >> 20)
                self._end_client_locked()
                return DROPPED
            self._queue.append((connection, b"".join(parts), carries or Delivery()))
            self._queued += size
            self._lock.notify_all()
            return QUEUED

    def drained(self) -> bool:
        """Nothing queued is left unsent (to the current client, or discarded)."""
        with self._lock:
            return not self._queue

    def _end_client_locked(self) -> None:
        if self._client is not None:
            try:
                self._client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already gone
            self._client.close()
            self._client = None
        for connection, _, carries in self._queue:
            self._discard_locked(connection, carries)
        self._queue.clear()
        self._queued = 0
        self._lock.notify_all()

    def _discard_locked(self, connection: int, carries: Delivery) -> None:
        (self.discarded_dropped if connection == self._dropped_connection else self.discarded_gone).add(carries)

    def _forget_closed_client_locked(self) -> None:
        """A client that closed its end while nothing was sent to it is noticed here, not at the
        next scan: LiberTEM-live connects again after a close, and must find the place free."""
        if self._client is None:
            return
        try:
            # LiberTEM never writes to us: readable means its end closed (or it sent what we ignore).
            data = self._client.recv(4096, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._client.recv(len(data), socket.MSG_DONTWAIT)
            return
        self.clients_gone += 1
        log.info("libertem: client of connection %d closed its connection", self.connection)
        self._end_client_locked()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, peer = self._listener.accept()
            except TimeoutError:
                with self._lock:
                    self._forget_closed_client_locked()
                continue
            except OSError:
                return  # closed
            with self._lock:
                self._forget_closed_client_locked()
                if self._client is not None:
                    # The stream is one acquisition after another to one reader: a second would
                    # cut it in two.
                    self.clients_refused += 1
                    client.close()
                    continue
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._client = client
                self.connection += 1
                log.info("libertem: client %s:%d connected (connection %d)", peer[0], peer[1], self.connection)
                self._lock.notify_all()

    def _write(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stop.is_set():
                    self._lock.wait()
                if self._stop.is_set():
                    return
                connection, data, carries = self._queue.popleft()
                self._queued -= len(data)
                client = self._client if connection == self.connection else None
                if client is None:
                    self._discard_locked(connection, carries)
                self._lock.notify_all()
            if client is None:
                continue
            try:
                client.sendall(data)
                with self._lock:
                    self.bytes_sent += len(data)
                    self.delivered.add(carries)
            except OSError as error:
                with self._lock:
                    # Cut off while being written: the client did not get it whole.
                    self._discard_locked(connection, carries)
                    if connection == self.connection and self._client is client:
                        self.clients_gone += 1
                        log.info("libertem: client of connection %d gone (%s)", connection, error)
                        self._end_client_locked()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._end_client_locked()
        self._listener.close()
        for thread in self._threads:
            thread.join(5)
