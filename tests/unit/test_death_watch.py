"""A NodeGroup rank's watch of producers that died mid-scan (consumer/nodegroup/death_watch.py): a receiver
whose threads all died mid-scan has its port closed at once; one with a thread alive, or whose
threads never began the scan, is left to the timeout."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from sectorflow import absences
from sectorflow.absences import gone_after_s
from sectorflow.configs import load_config
from sectorflow.consumer.nodegroup import death_watch
from sectorflow.consumer.nodegroup.death_watch import DeathWatch
from sectorflow.protocol import (
    STATE_FINISHED,
    STATE_STREAMING,
    ProducerScanRecord,
    ScanRequestRecord,
    ServiceStatus,
    scan_producer_key,
    scan_request_key,
    wall_clock_s,
)

SCAN = 5


@dataclass
class FakeClient:
    """The kvstore client's part the watch uses: a replica of ``entries`` and ``statuses``."""

    entries: dict[str, bytes] = field(default_factory=dict)
    producers: dict[str, ServiceStatus] = field(default_factory=dict)
    callbacks: list[Any] = field(default_factory=list)

    def on_change(self, prefix: str, callback: Any) -> int:
        self.callbacks.append(callback)
        return len(self.callbacks)

    def synced(self) -> bool:
        return True

    def statuses(self, service: str) -> dict[tuple[str, str], ServiceStatus]:
        return {(service, name): status for name, status in self.producers.items()}

    def subtree(self, prefix: str) -> dict[str, bytes]:
        return {key: value for key, value in self.entries.items() if key.startswith(prefix)}

    def write(self, key: str, value: bytes) -> None:
        self.entries[key] = value
        for callback in self.callbacks:
            callback(key, value)


@dataclass
class FakeGroup:
    closed: list[tuple[int, int, int]] = field(default_factory=list)

    def close_aborted(self, scan: int, receiver: int, forwarded: int) -> None:
        self.closed.append((scan, receiver, forwarded))


@dataclass
class Local:
    uid: str
    group: FakeGroup = field(default_factory=FakeGroup)


def record(receiver: int, thread: int, state: str, updated_s: float) -> bytes:
    return ProducerScanRecord(receiver=receiver, thread=thread, state=state, routing=["ng-a"], counts={"ng-a": 16},
                              owned=16, lost_upstream=0, sent=4, spilled=0, spill_file="", partial=False, error="",
                              updated_s=updated_s).encode()


def test_a_receiver_whose_threads_all_died_has_its_port_closed_once_and_one_with_a_live_thread_waits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    for module in (absences, death_watch):
        monkeypatch.setattr(module, "monotonic", lambda: clock[0])
    config = load_config("configs/local.toml")
    client, group = FakeClient(), Local("ng-a")
    watch = DeathWatch(client, config, [group])
    long_ago = wall_clock_s() - 60.0
    client.write(scan_request_key(SCAN), ScanRequestRecord(
        scan_number=SCAN, scan_x=4, scan_y=4, source="simulator", routing=["ng-a"], producer_threads=[1, 2, 1, 1],
        requested_s=long_ago).encode())
    live = ServiceStatus(state=STATE_STREAMING, scan=SCAN)
    for receiver, thread, state in ((0, 0, STATE_FINISHED), (1, 0, STATE_STREAMING), (1, 1, STATE_STREAMING),
                                    (2, 0, STATE_STREAMING), (3, 0, STATE_STREAMING)):
        client.write(scan_producer_key(SCAN, receiver, thread), record(receiver, thread, state, long_ago))
    # Receiver 1 lost one thread of two; receiver 2's daemon is gone; receiver 3's streams on.
    client.producers = {"r0t0": live, "r1t1": live, "r3t0": live}
    watch.check()
    assert group.group.closed == [], "absent now, but not yet for as long as a kvstore restart may take"
    clock[0] += gone_after_s(config)
    watch.check()
    assert group.group.closed == [(SCAN, 2, 0)]
    # A receiver gone before it began the scan (no record) waits for the timeout, as before.
    del client.entries[scan_producer_key(SCAN, 3, 0)]
    client.producers = {"r0t0": live, "r1t1": live}
    clock[0] += gone_after_s(config)
    watch.check()
    assert group.group.closed == [(SCAN, 2, 0)], "closed once, and receiver 3 left to the timeout"
