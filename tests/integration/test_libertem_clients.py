"""The LiberTEM bridge's clients on a real loopback socket (libertem_bridge/SPEC.md, "Clients" and
"Status"): a client that never reads is disconnected once the bridge's bounded queue is full, its
scan's further frames counted as dropped and the client as dropped, in the status the bridge
publishes; the next client gets the next scan whole. The frames come from a source in this test,
so that the bridge's side is all there is (tests/e2e/test_libertem_live.py runs the whole stack)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

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

    def put_scan(self, scan: int, rows: int, cols: int, per_batch: int = 64) -> None:
        rng = np.random.default_rng(scan)
        positions = rows * cols
        batches = []
        for first in range(0, positions, per_batch):
            count = min(per_batch, positions - first)
            events = np.sort(rng.integers(0, FRAME[0] * FRAME[1], (count, EVENTS_PER_FRAME)), axis=1).astype(np.uint32)
            offsets = np.arange(count + 1, dtype=np.uint64) * EVENTS_PER_FRAME
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
def running(local_config: Config) -> Iterator[tuple[Source, AcquisitionServer, Statuses, Bridge]]:
    server = AcquisitionServer("127.0.0.1", 0, QUEUE_BYTES)
    source, statuses = Source(), Statuses()
    bridge = Bridge(local_config, server, source=source, publisher=statuses)  # type: ignore[arg-type]
    stop = threading.Event()
    thread = threading.Thread(target=bridge.run, args=(stop,), name="bridge")
    thread.start()
    try:
        yield source, server, statuses, bridge
    finally:
        stop.set()
        thread.join(30)
        server.close()
    assert not thread.is_alive()
    assert statuses.last is not None and statuses.last.state == "stopped"  # the last word


def read_acquisition(client: socket.socket) -> tuple[int, int]:
    """Reads one acquisition off ``client``: (its sequence, its frames)."""
    stream = client.makefile("rb")
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
    # Every frame of the scan is accounted for: written to the client's socket before the drop, or
    # dropped (still queued at the drop, or released after it); "sent" holds only what the socket took.
    assert extra["frames_dropped"] > 0 and extra["frames_sent"] + extra["frames_dropped"] == 640
    assert extra["frames_sent"] * 8 * EVENTS_PER_FRAME <= last.bytes  # each event: index, value (u32)
    assert extra["positions_empty"] == 0 and extra["frames_unsent"] == 0

    with socket.create_connection(("127.0.0.1", port)) as reader:
        wait_until(lambda: statuses.extra().get("client_connected"), 30, "the next client in the status")
        source.put_scan(2, 4, 8)
        reader.settimeout(60)
        assert read_acquisition(reader) == (2, 32)
        wait_until(lambda: statuses.extra().get("last_scan") == 2, 60, "scan 2 over")
        # The server counts a part as delivered once its writer thread has written it whole, which
        # may come after the client has read it and after the bridge has closed the scan.
        sent_before = extra["positions_sent"]
        wait_until(lambda: statuses.extra().get("positions_sent") == sent_before + 32, 60, "scan 2 counted as sent")
    last = statuses.last
    extra = last.extra
    assert extra["last_scan_served"] is True and extra["last_scan_positions"] == 32 and extra["last_scan_empty"] == 0
    assert extra["scans_served"] == 1 and extra["clients_dropped"] == 1
    assert last.messages == extra["positions_sent"]
