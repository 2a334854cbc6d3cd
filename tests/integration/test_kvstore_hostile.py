"""What a hostile or careless peer can send a real `sectorflow kvstore`, sent as it would send it (CHP by
hand from pyzmq, kvstore_support.RawPeer), and what must still work afterwards: the server keeps
serving and counts what it refused, the readers skip what does not decode and say so once."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable

import msgpack
import pytest
from support import Processes, wait_until
from kvstore_support import RawPeer, KvServer, clients, kvstore, raw_peer  # noqa: F401  (fixtures)

from sectorflow.kvstore import (
    ACQUIRE_REQUEST_KEY,
    AcquireRequest,
    Client,
    NodeGroupRecord,
    ServiceStatus,
    nodegroup_key,
    status_key,
)
from sectorflow.producer.acquire import expected_producers

SYNC_S = 10.0  # deadline of waits; a failure guard, not a speed requirement
RUN_S = 60.0  # deadline of a command; a failure guard only

# Valid msgpack, not records: what breaks a reader that trusts every entry.
POISON = {
    b"nodegroups/x": msgpack.packb([1, 2, 3]),
    b"status/x/y": msgpack.packb({"hello": 1}),
    b"status/producer/r9t9": msgpack.packb({"version": 1, "state": "streaming"}),
}


def sectorflow(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True,
                          timeout=RUN_S, stdin=subprocess.DEVNULL)


def poison(raw_peer: RawPeer, observer: Client) -> None:
    for key, body in POISON.items():
        raw_peer.kvset_until(key, body, lambda: observer.get(key.decode()) == body, f"{key!r} in the replica")


def test_poisoned_entries_leave_acquire_working_and_are_reported_once(
    kvstore: KvServer, raw_peer: RawPeer, clients: Callable[..., Client], processes: Processes
) -> None:
    observer = clients(kvstore.config)
    observer.set(nodegroup_key("ng-1"), NodeGroupRecord(uid="ng-1", host="127.0.0.1", ports=[6200]).encode())
    poison(raw_peer, observer)
    wait_until(lambda: observer.get(nodegroup_key("ng-1")), SYNC_S, "the good registration")

    acquire = processes.sectorflow("acquire", "--config", str(kvstore.path), "--scan-number", "7", "--scan-shape",
                                   "4x4", "--wait", "--timeout", str(RUN_S), name="acquire")
    raw = wait_until(lambda: observer.get(ACQUIRE_REQUEST_KEY), SYNC_S, "the acquire request")
    assert AcquireRequest.decode(raw).routing == ["ng-1"], "the bad registration is skipped, the good one used"
    # Stand in for the producers: every thread of the configuration reports the scan finished, while
    # acquire --wait reads status/producer/, poisoned entry included, at every poll.
    names = expected_producers(kvstore.config)
    for name in names:
        finished = ServiceStatus(state="finished", scan=7, messages=4, bytes=100,
                                 extra={"mode": "streaming", "nodegroups": 1})
        observer.set(status_key("producer", name), finished.encode())

    assert acquire.wait(RUN_S) == 0, processes.output(acquire)
    out = processes.output(acquire)
    assert f"scan 7: streamed to 1 NodeGroups by {len(names)} producer threads: {4 * len(names)} messages" in out
    assert out.count("skipped nodegroups/x, which does not decode: NodeGroupRecord: expected a msgpack map, "
                     "got an array") == 1
    assert out.count("skipped status/producer/r9t9, which does not decode: ServiceStatus: missing field") == 1
    assert "Traceback" not in out


def test_poisoned_entries_are_shown_by_status(
    kvstore: KvServer, raw_peer: RawPeer, clients: Callable[..., Client]
) -> None:
    observer = clients(kvstore.config)
    poison(raw_peer, observer)

    result = sectorflow("status", "--config", str(kvstore.path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.rstrip("\n").splitlines()
    assert any(line.startswith("status/x/y") and " invalid " in line for line in lines), result.stdout
    assert any(line.startswith("nodegroups/x") and "invalid: NodeGroupRecord" in line for line in lines)
    assert lines[-1] == ("3 entries do not decode (shown as invalid above): nodegroups/x, status/producer/r9t9, "
                         "status/x/y")
    assert any(line.split()[:3] == ["kvstore", "server", "serving"] for line in lines)


def test_client_readers_skip_bad_entries_log_each_once_and_count_them(
    kvstore: KvServer, raw_peer: RawPeer, clients: Callable[..., Client], caplog: pytest.LogCaptureFixture
) -> None:
    observer = clients(kvstore.config)
    good = NodeGroupRecord(uid="ng-1", host="127.0.0.1", ports=[6200])
    observer.set(nodegroup_key("ng-1"), good.encode())
    observer.set(status_key("producer", "r0t0"), ServiceStatus(state="idle").encode())
    poison(raw_peer, observer)
    wait_until(lambda: observer.get(nodegroup_key("ng-1")) and observer.get(status_key("producer", "r0t0")), SYNC_S,
               "the good entries")

    with caplog.at_level(logging.WARNING, logger="sectorflow.kvstore.client"):
        for _ in range(3):  # a reader polls: the report must not repeat with every read
            assert observer.nodegroups() == [good]
            assert sorted(observer.statuses()) == [("kvstore", "server"), ("producer", "r0t0")]
            assert list(observer.statuses("producer")) == [("producer", "r0t0")]
    skipped = sorted(record.getMessage().split()[3].rstrip(",") for record in caplog.records)
    assert skipped == ["nodegroups/x", "status/producer/r9t9", "status/x/y"]
    assert observer.bad_records == 3
