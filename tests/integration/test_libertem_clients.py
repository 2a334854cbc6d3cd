"""The LiberTEM bridge's clients on a real loopback socket (libertem_bridge/SPEC.md, "Clients" and
"Status"), tried as an attacker would: a reader whose socket another account owns is refused
before a byte and counted; a client that connects and never reads is dropped at the read deadline
(or once the bounded queue is full), counted, and holds neither the stream nor a reading client's
scans; a scan only such a client got is not served and none of its positions counts as sent;
clients beyond the bound are refused and counted. The frames come from a source in this test, so
that the bridge's side is all there is (tests/e2e/test_libertem_live.py runs the whole stack)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np
import pytest
from support import wait_until

from sectorflow.configs import Config
from sectorflow.libertem_bridge import AcquisitionServer, Bridge, asi_wire
from sectorflow.live import wire
from sectorflow.protocol import ServiceStatus

FRAME = (128, 128)
EVENTS_PER_FRAME = 2000  # 16 kB of the stream per frame
QUEUE_BYTES = 1 << 20


class Source:
    """The live stream's ``frames`` topic as the bridge reads it: the batches put here, in order."""

    def __init__(self) -> None:
        self.publishers = {"ng-a"}
        self._batches: list[wire.Batch] = []
        self._lock = threading.Lock()

    def put_scan(self, scan: int, rows: int, cols: int, per_batch: int = 64,
                 events_per_frame: int = EVENTS_PER_FRAME) -> None:
        rng = np.random.default_rng(scan)
        positions = rows * cols
        batches = []
        for first in range(0, positions, per_batch):
            count = min(per_batch, positions - first)
            events = np.sort(rng.integers(0, FRAME[0] * FRAME[1], (count, events_per_frame)), axis=1).astype(np.uint32)
            offsets = np.arange(count + 1, dtype=np.uint64) * events_per_frame
            batches.append(wire.Batch(wire.FRAMES, "ng-a", scan, (rows, cols), FRAME, first + count == positions,
                                      {"position": np.arange(first, first + count, dtype=np.uint32),
                                       "offsets": offsets, "events": events.reshape(-1)}))
        with self._lock:
            self._batches += batches

    def receive(self, timeout_ms: int) -> wire.Batch | None:
        with self._lock:
            return self._batches.pop(0) if self._batches else None

    def close(self) -> None:
        pass


class Statuses:
    """What the bridge publishes, kept here in place of the kvstore."""

    def __init__(self) -> None:
        self.last: ServiceStatus | None = None

    def publish(self, status: ServiceStatus, now: float, force: bool = False) -> None:
        self.last = status

    def extra(self) -> dict:
        return self.last.extra if self.last is not None else {}


@pytest.fixture
def serving(local_config: Config) -> Iterator[Callable[..., tuple[Source, AcquisitionServer, Statuses, Bridge]]]:
    """Starts a bridge on a server made with the given arguments (AcquisitionServer's keywords)."""
    started: list[tuple[AcquisitionServer, threading.Thread, threading.Event, Statuses]] = []

    def serve(**server_args: object) -> tuple[Source, AcquisitionServer, Statuses, Bridge]:
        server = AcquisitionServer("127.0.0.1", 0, QUEUE_BYTES, **server_args)  # type: ignore[arg-type]
        source, statuses = Source(), Statuses()
        bridge = Bridge(local_config, server, source=source, publisher=statuses)  # type: ignore[arg-type]
        stop = threading.Event()
        thread = threading.Thread(target=bridge.run, args=(stop,), name="bridge")
        thread.start()
        started.append((server, thread, stop, statuses))
        return source, server, statuses, bridge

    yield serve
    for server, thread, stop, statuses in started:
        stop.set()
        thread.join(30)
        server.close()
        assert not thread.is_alive()
        assert statuses.last is not None and statuses.last.state == "stopped"  # the last word


@pytest.fixture
def running(serving) -> tuple[Source, AcquisitionServer, Statuses, Bridge]:
    return serving()


def read_acquisition(stream: BinaryIO) -> tuple[int, int]:
    """Reads one acquisition off ``stream`` (a client socket's file): (its sequence, its frames)."""
    head = stream.read(asi_wire.HEADER_BYTES)
    assert head[0] == 0, head  # acquisition start
    sequence = int.from_bytes(head[13:17], "little")  # after tag, version, format, nav, dtype, sig, dtype
    assert stream.read(asi_wire.HEADER_BYTES)[0] == 1  # scan start
    frames = 0
    while True:
        header = stream.read(asi_wire.HEADER_BYTES)
        if header[0] != 2:
            assert header[0] == 3 and stream.read(asi_wire.HEADER_BYTES)[0] == 4  # scan end, acquisition end
            return sequence, frames
        nframes = int.from_bytes(header[2:6], "little")
        length = int.from_bytes(header[6:10], "little")
        stream.read(4 * (nframes + 1) + 8 * length)
        frames += nframes


def test_a_client_that_never_reads_is_dropped_counted_and_the_next_one_gets_the_next_scan_whole(running) -> None:
    source, server, statuses, _ = running
    port = server.address[1]
    stuck = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        stuck.connect(("127.0.0.1", port))
        wait_until(lambda: statuses.extra().get("client_connected"), 30, "the stuck client in the status")
        # 640 frames of 16 kB: 10 MB, more than loopback's largest send buffer (4 MiB) and the queue.
        source.put_scan(1, 20, 32)
        wait_until(lambda: statuses.extra().get("last_scan") == 1, 60, "scan 1 over")
    finally:
        stuck.close()
    last = statuses.last  # one status: the bridge thread may publish another while this one is read
    extra = last.extra
    assert extra["clients_dropped"] == 1 and extra["client_connected"] is False
    assert extra["last_scan_served"] is False and extra["scans_unserved"] == 1
    # Every frame of the scan is accounted for: dropped (queued, or in the sockets' buffers, at the
    # drop, or released after it); "sent" holds only what the client read, and it read nothing.
    assert extra["frames_dropped"] == 640 and extra["frames_sent"] == 0 and extra["positions_sent"] == 0
    assert last.bytes == 0 and last.messages == 0
    assert extra["positions_empty"] == 0 and extra["frames_unsent"] == 0

    with socket.create_connection(("127.0.0.1", port)) as reader:
        wait_until(lambda: statuses.extra().get("client_connected"), 30, "the next client in the status")
        source.put_scan(2, 4, 8)
        reader.settimeout(60)
        assert read_acquisition(reader.makefile("rb")) == (2, 32)
        wait_until(lambda: statuses.extra().get("last_scan") == 2, 60, "scan 2 over")
        # The server counts a part as sent once it sees the client has read it (it looks every
        # 0.1 s), which may come after the bridge has closed the scan.
        sent_before = extra["positions_sent"]
        wait_until(lambda: statuses.extra().get("positions_sent") == sent_before + 32, 60, "scan 2 counted as sent")
    last = statuses.last
    extra = last.extra
    assert extra["last_scan_served"] is True and extra["last_scan_positions"] == 32 and extra["last_scan_empty"] == 0
    assert extra["scans_served"] == 1 and extra["clients_dropped"] == 1
    assert last.messages == extra["positions_sent"]


def test_a_reader_whose_socket_another_account_owns_is_refused_before_a_byte_and_counted(serving) -> None:
    # The bridge admits the account it is given; this test's is another: a local reader with no key
    # (tests/e2e/test_libertem_live.py runs one as another user on the whole stack).
    source, server, statuses, _ = serving(account=os.geteuid() + 1)
    with socket.create_connection(("127.0.0.1", server.address[1])) as stranger:
        stranger.settimeout(30)
        wait_until(lambda: statuses.extra().get("clients_denied") == 1, 30, "the stranger refused, counted")
        source.put_scan(1, 4, 8)
        wait_until(lambda: statuses.extra().get("last_scan") == 1, 60, "scan 1 over")
        assert stranger.recv(1 << 16) == b""  # closed before a byte
    extra = statuses.extra()
    assert extra["client_connected"] is False and extra["clients"] == 0 and extra["clients_refused"] == 0
    assert extra["last_scan_served"] is False and extra["scans_unserved"] == 1
    assert extra["positions_sent"] == 0 and extra["frames_unsent"] == 32


def test_a_client_that_never_reads_holds_neither_the_stream_nor_the_scans_of_one_that_reads(serving) -> None:
    # The squatter connects first, is of the bridge's own account, and never reads: the reader
    # beside it reads three scans whole as they come, and the squatter is dropped at the deadline.
    source, server, statuses, _ = serving(account=os.geteuid(), read_deadline_s=2.0)
    port = server.address[1]
    with socket.create_connection(("127.0.0.1", port)) as squatter:
        wait_until(lambda: statuses.extra().get("clients") == 1, 30, "the squatter in the status")
        with socket.create_connection(("127.0.0.1", port)) as reader:
            wait_until(lambda: statuses.extra().get("clients") == 2, 30, "the reader in the status")
            reader.settimeout(60)
            stream = reader.makefile("rb")
            for scan in (1, 2, 3):
                source.put_scan(scan, 4, 8)
                assert read_acquisition(stream) == (scan, 32)
            wait_until(lambda: statuses.extra().get("last_scan") == 3, 60, "scan 3 counted")
            wait_until(lambda: statuses.extra().get("clients_dropped") == 1, 30, "the squatter dropped")
            wait_until(lambda: statuses.extra().get("positions_sent") == 96, 30, "the reader's scans counted as sent")
            last = statuses.last
        squatter.settimeout(30)
        while squatter.recv(1 << 20):
            pass  # what its kernel took before the drop, then the bridge's close
    extra = last.extra
    assert extra["clients"] == 1 and extra["clients_gone"] == 0 and extra["clients_refused"] == 0
    assert extra["scans_served"] == 3 and extra["scans_unserved"] == 0
    assert extra["last_scan_served"] is True and extra["last_scan_positions"] == 32 and extra["last_scan_empty"] == 0
    # Sent: the reader's three scans only; the squatter's share of each scan it started on dropped.
    assert extra["frames_sent"] == 96 and last.messages == 96 and extra["frames_unsent"] == 0
    assert extra["frames_dropped"] in (32, 64, 96)


def test_a_scan_only_a_client_that_never_reads_got_is_not_served_and_no_position_of_it_counts_as_sent(
        serving) -> None:
    source, server, statuses, _ = serving(read_deadline_s=2.0)
    with socket.create_connection(("127.0.0.1", server.address[1])):
        wait_until(lambda: statuses.extra().get("clients") == 1, 30, "the squatter in the status")
        # 1,024 positions of 20 events, some 170 kB: the sockets' buffers may take it whole.
        source.put_scan(1, 32, 32, events_per_frame=20)
        wait_until(lambda: statuses.last.state == "streaming", 30, "scan 1 open")
        wait_until(lambda: statuses.extra().get("last_scan") == 1, 60, "scan 1 counted")
        last = statuses.last
    extra = last.extra
    assert extra["clients_dropped"] == 1 and extra["clients"] == 0
    assert extra["last_scan_served"] is False and extra["scans_unserved"] == 1 and extra["scans_served"] == 0
    assert extra["last_scan_positions"] == 1024 and extra["last_scan_empty"] == 0
    assert extra["positions_sent"] == 0 and extra["frames_sent"] == 0 and last.messages == 0 and last.bytes == 0
    assert extra["frames_dropped"] == 1024 and extra["frames_unsent"] == 0


def test_clients_beyond_the_bound_are_refused_and_counted_and_each_admitted_one_reads_the_scan(serving) -> None:
    source, server, statuses, _ = serving(max_clients=2)
    port = server.address[1]
    with socket.create_connection(("127.0.0.1", port)) as first, \
            socket.create_connection(("127.0.0.1", port)) as second:
        wait_until(lambda: statuses.extra().get("clients") == 2, 30, "two clients in the status")
        with socket.create_connection(("127.0.0.1", port)) as third:
            wait_until(lambda: statuses.extra().get("clients_refused") == 1, 30, "the third refused, counted")
            third.settimeout(30)
            assert third.recv(1 << 16) == b""
        source.put_scan(1, 4, 8)
        for client in (first, second):
            client.settimeout(60)
            assert read_acquisition(client.makefile("rb")) == (1, 32)
        wait_until(lambda: statuses.extra().get("positions_sent") == 64, 30, "both clients' reads counted")
        extra = statuses.extra()
    assert extra["scans_served"] == 1 and extra["clients"] == 2 and extra["clients_denied"] == 0
