"""The bridge's TCP side (libertem_bridge/SPEC.md, "Clients"): LiberTEM clients admitted up to a
bound, with ``[security]`` on only those of the bridge's own account, each with a slot of its own
(libertem_bridge/slot.py); one that reads too slowly, or nothing within the deadline, is dropped,
so that neither a slow client nor one that never reads costs the others or the live stream anything."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterable

from sectorflow.configs import LibertemConfig
from sectorflow.configs.loader import is_loopback
from sectorflow.errors import UsageError

from .peers import SocketTable
from .slot import DROPPED as SLOT_DROPPED
from .slot import GONE, Delivery, Slot, Totals

log = logging.getLogger(__name__)

#: How often the serving thread looks at its clients and its stop flag, seconds.
POLL_S = 0.1
#: Clients served at once; a further one is refused, counted ([libertem] max_clients).
MAX_CLIENTS: int = LibertemConfig.max_clients
#: A client holding bytes it has read none of for this long is dropped, seconds ([libertem]
#: read_deadline_s). LiberTEM reads an acquisition as it comes; one idle between acquisitions holds
#: nothing unread, and is kept.
READ_DEADLINE_S: float = LibertemConfig.read_deadline_s

#: What ``send`` did with the parts for a connection: queued; refused as that connection went (or
#: never was); refused as it was dropped (now, as the queue would pass its bound, or before).
QUEUED, ENDED, DROPPED = "queued", "ended", "dropped"
#: Where a marked part stands for a connection (``outcome``): read by its client; queued or
#: written and not read yet; never to be read (the client went or was dropped first).
READ, PENDING, LOST = "read", "pending", "lost"


def parse_listen(address: str, allow_remote: bool, secured: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (port 0: the OS chooses) as (host, port).

    :raises UsageError: not HOST:PORT; a host that is not loopback without ``allow_remote``, or
        at all when ``secured`` (the bridge knows who a client is only on this host).
    """
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen {address!r} is not HOST:PORT (e.g. 127.0.0.1:8283)")
    if secured and (allow_remote or not is_loopback(host)):
        raise UsageError(f"--listen {address!r}{' --allow-remote' if allow_remote else ''}: with [security] on the "
                         f"bridge serves loopback only (LiberTEM's asi_tpx3 client has no key: the bridge admits "
                         f"this account's processes on this host); from another host, tunnel to it "
                         f"(ssh -L 8283:127.0.0.1:8283 as this account)")
    if not allow_remote and not is_loopback(host):
        raise UsageError(f"--listen {address!r}: {host} is not a loopback address, and the asi_tpx3 stream has "
                         f"no authentication (anyone who connects reads the scans); run the bridge beside "
                         f"LiberTEM on 127.0.0.1, or pass --allow-remote on a network you trust")
    return host, int(port)


class AcquisitionServer:
    """Listens on ``host:port``; holds up to ``max_clients`` clients, each with a queue of at most
    ``queue_bytes``; sends each what ``send`` queued for it, in order. With ``account`` (a uid),
    only a client whose socket that account owns is admitted.

    Every client connection has a number; what is queued for one that ended is discarded.

    :raises OSError: the address cannot be bound (the message names it).
    :raises SectorflowError: this host's socket table cannot be read (peers.py).
    """

    def __init__(self, host: str, port: int, queue_bytes: int, *, max_clients: int = MAX_CLIENTS,
                 read_deadline_s: float = READ_DEADLINE_S, account: int | None = None) -> None:
        self.queue_bytes = queue_bytes
        self.max_clients = max_clients
        self.read_deadline_s = read_deadline_s
        self.account = account
        self._table = SocketTable()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind((host, port))
        except OSError as error:
            self._listener.close()
            self._table.close()
            raise OSError(f"cannot listen on {host}:{port} for LiberTEM: {error.strerror or error}") from None
        self._listener.listen(16)
        self._listener.settimeout(POLL_S)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._slots: dict[int, Slot] = {}  # by connection number
        self._ended: dict[int, str] = {}  # connection number: why it ended (slot.py)
        self._read: set[tuple[int, int]] = set()  # (connection, mark) read by that client
        self.connection = 0  # number of the last client connection; 0: none yet
        self.totals = Totals()
        self.clients_denied = 0  # not this account's ([security] on): never sent a byte
        self.clients_refused = 0  # admitted, but max_clients were connected
        self.clients_dropped = 0  # disconnected: read too slowly for the queue, or nothing within the deadline
        self.clients_gone = 0  # connections the client closed (or that failed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="libertem-accept", daemon=True)
        self._thread.start()

    # What the clients got (slot.py, Totals): read whole, or discarded unread with their client.
    @property
    def delivered(self) -> Delivery:
        return self.totals.delivered

    @property
    def discarded_dropped(self) -> Delivery:
        return self.totals.discarded_dropped

    @property
    def discarded_gone(self) -> Delivery:
        return self.totals.discarded_gone

    @property
    def bytes_sent(self) -> int:
        """Bytes clients have read."""
        return self.totals.bytes_read

    @property
    def connected(self) -> bool:
        with self._lock:
            return bool(self._slots)

    def clients(self) -> list[int]:
        """The connections held now, oldest first."""
        with self._lock:
            return sorted(self._slots)

    def send(self, connections: Iterable[int], parts: list[bytes], carries: Delivery | None = None,
             mark: int | None = None) -> dict[int, str]:
        """Queue ``parts`` (which carry ``carries``; once a client has read them, ``outcome(c, mark)``
        says so) for each of ``connections``: QUEUED, ENDED or DROPPED each."""
        data = b"".join(parts)  # one copy, whatever the clients
        results: dict[int, str] = {}
        with self._lock:
            for connection in connections:
                slot = self._slots.get(connection)
                if slot is None:
                    results[connection] = DROPPED if self._ended.get(connection) == SLOT_DROPPED else ENDED
                elif slot.enqueue(data, carries or Delivery(), mark):
                    results[connection] = QUEUED
                else:
                    self.clients_dropped += 1
                    log.warning("libertem: the client of connection %d reads slower than the scans come (%d MiB "
                                "queued): disconnected", connection, slot.queued_mib)
                    self._end_locked(slot, SLOT_DROPPED)
                    results[connection] = DROPPED
        return results

    def outcome(self, connection: int, mark: int) -> str:
        """READ, PENDING or LOST: what became of the part marked ``mark`` sent on ``connection``."""
        with self._lock:
            if (connection, mark) in self._read:
                return READ
            return PENDING if connection in self._slots else LOST

    def forget(self, mark: int) -> None:
        """The bridge has what it wanted to know of ``mark``."""
        with self._lock:
            self._read = {(c, m) for c, m in self._read if m != mark}

    def drained(self) -> bool:
        """Every client has read all that was queued for it."""
        with self._lock:
            return not any(slot.stalled(float("inf"), 0.0) for slot in self._slots.values())

    def _end_locked(self, slot: Slot, why: str) -> None:
        slot.end(why)
        self._read.update((slot.number, mark) for mark in slot.read_marks)
        del self._slots[slot.number]
        self._ended[slot.number] = why

    def _serve(self) -> None:
        watched = 0.0
        while not self._stop.is_set():
            try:
                client, peer = self._listener.accept()
            except TimeoutError:
                client = None
            except OSError:
                return  # closed
            if client is not None:
                self._admit(client, peer)
            now = time.monotonic()
            if now - watched >= POLL_S:
                self._watch(now)
                watched = now

    def _admit(self, client: socket.socket, peer: tuple) -> None:
        end = self._table.peer_end(client)
        if self.account is not None and (end is None or end.uid != self.account):
            # The asi_tpx3 stream has no handshake: who owns the client's end is all it shows.
            with self._lock:
                self.clients_denied += 1
                first = self.clients_denied == 1
            (log.warning if first else log.debug)(
                "libertem: refused a client from %s:%d: its socket is %s, not this bridge's account (uid %d); "
                "further ones are counted in clients_denied", peer[0], peer[1],
                "not on this host" if end is None else f"uid {end.uid}'s", self.account)
            client.close()
            return
        with self._lock:
            if len(self._slots) >= self.max_clients:
                self.clients_refused += 1
                client.close()
                log.info("libertem: refused a client from %s:%d: %d clients connected, the most the bridge serves",
                         peer[0], peer[1], len(self._slots))
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connection += 1
            self._slots[self.connection] = Slot(self.connection, client, end is not None, self._lock, self.totals,
                                                self.queue_bytes)
        log.info("libertem: client %s:%d connected (connection %d)", peer[0], peer[1], self.connection)

    def _watch(self, now: float) -> None:
        """What each client read; drop one that read nothing within the deadline; forget one that went."""
        with self._lock:
            slots = list(self._slots.values())
        for slot in slots:
            # Closed first, then read: a client that read all and closed is found closed with
            # nothing unread, and its last reads count.
            gone = slot.closed_by_peer()
            slot.observe(self._table)
            with self._lock:
                self._read.update((slot.number, mark) for mark in slot.read_marks)
                slot.read_marks.clear()
                if slot.ended:
                    continue
                if gone or slot.failed is not None:
                    self.clients_gone += 1
                    log.info("libertem: client of connection %d %s", slot.number,
                             f"gone ({slot.failed})" if slot.failed is not None else "closed its connection")
                    self._end_locked(slot, GONE)
                elif slot.stalled(now, self.read_deadline_s):
                    self.clients_dropped += 1
                    log.warning("libertem: the client of connection %d read nothing for %g s: disconnected",
                                slot.number, self.read_deadline_s)
                    self._end_locked(slot, SLOT_DROPPED)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)
        with self._lock:
            slots = list(self._slots.values())
            for slot in slots:
                self._end_locked(slot, GONE)
        for slot in slots:
            slot.join(5)
        self._table.close()
