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
import zmq
from support import Processes, wait_until
from kvstore_support import (  # noqa: F401  (fixtures)
    KvServer,
    RawPeer,
    clients,
    kvstore,
    raw_peer,
    server_status,
    start_kvstore,
)

from sectorflow.kvstore import Client, KvstoreError, decode_kvmsg
from sectorflow.protocol import (
    ACQUIRE_REQUEST_KEY,
    AcquireRequest,
    NodeGroupRecord,
    ProducerScanRecord,
    ScanFileRecord,
    ServiceStatus,
    nodegroup_key,
    scan_file_key,
    scan_producer_key,
    status_key,
    wall_clock_s,
)

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
    # Stand in for the producers and the NodeGroups' rank 0: every producer thread of the configuration
    # and the file record the scan whole, while acquire --wait reads status/producer/ (poisoned entry
    # included) and the scan's records (one of them poisoned) at every poll.
    config = kvstore.config
    observer.set_once("scans/0000000007/producer/r9t9", msgpack.packb({"version": 1}))
    for receiver, spec in enumerate(config.receivers):
        for thread in range(spec.threads):
            owned = len(range(thread, 16, spec.threads))
            part = ProducerScanRecord(receiver=receiver, thread=thread, state="finished", routing=["ng-1"],
                                      counts={"ng-1": owned}, owned=owned, lost_upstream=0, sent=owned, spilled=0,
                                      spill_file="", partial=False, error="", updated_s=wall_clock_s())
            observer.set_once(scan_producer_key(7, receiver, thread), part.encode())
    whole = ScanFileRecord(outcome="complete", path="/data/FOURD_0000000007_counted.h5", extra_paths=[],
                           positions=16, frames_written=16, positions_missing=0,
                           sectors_counted=[16] * config.n_receivers, reason="", written_s=wall_clock_s())
    observer.set_once(scan_file_key(7), whole.encode())

    assert acquire.wait(RUN_S) == 0, processes.output(acquire)
    out = processes.output(acquire)
    sectors = 16 * config.n_receivers
    assert f"scan 7: complete: {sectors} counted + 0 spilled + 0 missing = {sectors} sectors" in out
    assert out.count("skipped nodegroups/x, which does not decode: NodeGroupRecord: expected a msgpack map, "
                     "got an array") == 1
    assert out.count("skipped status/producer/r9t9, which does not decode: ServiceStatus: missing field") == 1
    assert out.count("skipped scans/0000000007/producer/r9t9, which does not decode: ProducerScanRecord") == 1
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
    assert any(line.split()[:3] == ["kvstore", "server", "idle"] for line in lines)


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


def counters(observer: Client) -> dict:
    """The server's own status fields as a replica sees them ({} before the first)."""
    status = server_status(observer)
    return {} if status is None else status.extra


def test_a_client_that_asks_for_snapshots_and_never_reads_is_dropped_not_buffered(
    kvstore: KvServer, clients: Callable[..., Client]
) -> None:
    writer = clients(kvstore.config)
    for i in range(300):
        writer.set(f"flood/{i:03d}", msgpack.packb("x" * 1000))
    observer = clients(kvstore.config)
    wait_until(lambda: len(observer.subtree("flood/")) == 300, SYNC_S, "the 300 keys in the observer's replica")
    wait_until(lambda: counters(observer).get("snapshots") == 2, SYNC_S, "the writer's and the observer's snapshots")

    flood = RawPeer(kvstore.port, rcvhwm=1)  # asks, and never reads
    try:
        for _ in range(2000):
            flood.snapshots.send_multipart([b"ICANHAZ?", b""])
        # Each request is answered whole at once, or dropped: asked again before it was read, or
        # stalled for good (after kStalledHeartbeats). 2000 replies of 300 kB cannot all fit any
        # pipe and kernel buffers: most are dropped, none waits for ever.
        done = wait_until(lambda: (c := counters(observer)) and c["snapshots"] + c["snapshots_dropped"] == 2002 and c,
                          3 * SYNC_S, "every flood request to be answered whole or dropped")
        assert done["snapshots_dropped"] >= 1000, done
        assert kvstore.process.poll() is None

        late = clients(kvstore.config)  # the server keeps answering a client that reads
        assert late.wait_synced(SYNC_S)
        assert len(late.subtree("flood/")) == 300
        writer.set("after/flood", msgpack.packb(1))
        wait_until(lambda: late.get("after/flood") == msgpack.packb(1), SYNC_S, "an update after the flood")
    finally:
        flood.close()
    wait_until(lambda: "snapshot(s) a client did not read" in kvstore.log(), SYNC_S, "the daemon's log line")


def test_a_client_that_reads_slowly_gets_a_whole_snapshot_of_a_large_map(
    kvstore: KvServer, clients: Callable[..., Client]
) -> None:
    count = 20_000  # 20 MB of values: far more than one peer's pipe (kSnapshotHwm) and socket buffers
    writer = clients(kvstore.config)
    for i in range(count):
        writer.set(f"big/{i:05d}", msgpack.packb("y" * 1000))
    wait_until(lambda: len(writer.subtree("big/")) == count, 6 * SYNC_S, f"the {count} keys in the writer's replica")

    reader = RawPeer(kvstore.port, rcvhwm=1)  # reads through a queue one message deep, in Python
    try:
        reader.snapshots.send_multipart([b"ICANHAZ?", b"big/"])
        keys = set()
        while True:
            assert reader.snapshots.poll(int(SYNC_S * 1000)), f"the snapshot stopped after {len(keys)} keys"
            key, *_ = reader.snapshots.recv_multipart()
            if key == b"KTHXBAI":
                break
            keys.add(key)
    finally:
        reader.close()
    assert keys == {f"big/{i:05d}".encode() for i in range(count)} | {b"status/kvstore/server"}  # and the stack's id
    wait_until(lambda: counters(writer).get("snapshots") == 2, SYNC_S, "the server to count the snapshot whole")
    assert counters(writer)["snapshots_dropped"] == 0


def test_an_oversized_value_is_refused_and_counted_and_a_larger_frame_only_cuts_its_sender(
    make_config: Callable, processes: Processes, clients: Callable[..., Client]
) -> None:
    server = start_kvstore(make_config, processes, kvstore={"max_value_bytes": 1024})  # frames up to 2048 bytes
    observer = clients(server.config)
    assert observer.wait_synced(SYNC_S)
    with pytest.raises(KvstoreError, match=r"kvstore set 'mine': value of 1503 bytes, the server takes at most 1024 "
                                           r"\(\[kvstore\] max_value_bytes\)"):
        observer.set("mine", msgpack.packb(b"m" * 1500))

    peer = RawPeer(server.port)
    try:
        peer.kvset_until(b"probe", msgpack.packb(0), lambda: observer.get("probe"), "the peer's first key")
        peer.kvset(b"too/big", msgpack.packb(b"b" * 1500))  # above max_value_bytes: refused, counted
        peer.kvset(b"far/too/big", msgpack.packb(b"b" * 100_000))  # above the frame limit: ZeroMQ cuts the peer
        wait_until(lambda: counters(observer).get("oversized") == 1, SYNC_S, "the server to count one oversized value")
        # The PUB reconnects by itself; what it sends now arrives.
        peer.kvset_until(b"after", msgpack.packb(1), lambda: observer.get("after"), "a key after the cut")
    finally:
        peer.close()
    assert observer.get("too/big") is None and observer.get("far/too/big") is None
    final = counters(observer)
    assert (final["oversized"], final["malformed"], final["errors"]) == (1, 0, 0)
    assert server.process.poll() is None
    wait_until(lambda: "refused 1 value(s) above max_value_bytes, 1 in all; first: update from 127.0.0.1: kvmsg "
                       "'too/big': value of 1503 bytes, at most 1024" in server.log(), SYNC_S, "the daemon's log line")


def test_a_ttl_of_1e10_is_clamped_and_the_key_expires_at_the_clamp(
    make_config: Callable, processes: Processes, clients: Callable[..., Client]
) -> None:
    server = start_kvstore(make_config, processes, kvstore={"max_ttl_s": 1.0, "scan_record_ttl_s": 1.0})
    observer = clients(server.config)
    assert observer.wait_synced(SYNC_S)
    deletions: list[str] = []
    observer.on_change("forever", lambda key, value: value is None and deletions.append(key))
    wire = zmq.Context.instance().socket(zmq.SUB)
    wire.linger = 0
    wire.subscribe(b"forever")
    wire.connect(f"tcp://127.0.0.1:{server.port + 1}")
    peer = RawPeer(server.port)
    try:
        peer.kvset_until(b"forever", msgpack.packb(1), lambda: wire.poll(0), "the KVPUB of the key",
                         properties=b"ttl=1e10\n")
        published = decode_kvmsg(wire.recv_multipart())
    finally:
        peer.close()
        wire.close()
    assert published.properties == {"ttl": "1"}, "the KVPUB carries the ttl the server granted"
    wait_until(lambda: deletions == ["forever"], SYNC_S, "the key to expire after max_ttl_s")
    final = wait_until(lambda: (c := counters(observer)) and c["expired"] == 1 and c, SYNC_S, "the expiry counted")
    assert (final["ttl_clamped"], final["malformed"], final["errors"]) == (1, 0, 0)
    assert server.process.poll() is None


def test_a_ttl_of_1e10_under_the_default_clamp_does_not_wrap_into_the_past(
    kvstore: KvServer, raw_peer: RawPeer, clients: Callable[..., Client]
) -> None:
    observer = clients(kvstore.config)
    assert observer.wait_synced(SYNC_S)
    expired: list[str] = []
    observer.on_change("", lambda key, value: value is None and expired.append(key))
    raw_peer.kvset_until(b"long", msgpack.packb(1), lambda: observer.get("long"), "the long-lived key",
                         properties=b"ttl=1e10\n")
    raw_peer.kvset_until(b"short", msgpack.packb(1), lambda: observer.get("short"), "the short-lived key",
                         properties=b"ttl=0.5\n")
    # Expiries go in deadline order: once the later, shorter one is gone, the first one's deadline
    # (clamped to a day, not overflowed) is known not to lie in the past.
    wait_until(lambda: "short" in expired, SYNC_S, "the short-lived key to expire")
    assert expired == ["short"] and observer.get("long") == msgpack.packb(1)
    assert counters(observer)["ttl_clamped"] == 1


def test_quota_and_full_map_refusals_are_counted_per_address_and_shown_by_status(
    make_config: Callable, processes: Processes, clients: Callable[..., Client]
) -> None:
    server = start_kvstore(make_config, processes, kvstore={"max_keys": 16, "max_keys_per_address": 10})
    observer = clients(server.config)  # on 127.0.0.1, and writes nothing
    assert observer.wait_synced(SYNC_S)
    a, b = RawPeer(server.port, source="127.0.0.2"), RawPeer(server.port, source="127.0.0.3")
    try:
        for peer, name in ((a, b"probe/a"), (b, b"probe/b")):  # connected once a key came through; then freed
            peer.kvset_until(name, msgpack.packb(0), lambda: observer.get(name.decode()), f"{name!r} at the server")
            peer.kvset_until(name, b"", lambda: observer.get(name.decode()) is None, f"{name!r} deleted")

        for i in range(12):  # 127.0.0.2 may hold 10 keys
            a.kvset(b"a/%02d" % i, msgpack.packb(i))
        wait_until(lambda: counters(observer).get("refused_quota") == 2, SYNC_S, "two writes over 127.0.0.2's quota")
        for i in range(10):  # the map holds 16 keys: room for 6 of 127.0.0.3's
            b.kvset(b"b/%02d" % i, msgpack.packb(i))
        wait_until(lambda: counters(observer).get("refused_full") == 4, SYNC_S, "four writes to the full map")
        assert sorted(observer.subtree("a/")) == [f"a/{i:02d}" for i in range(10)]
        assert sorted(observer.subtree("b/")) == [f"b/{i:02d}" for i in range(6)]

        # What a holder already has is never refused, full map or not; a deletion makes room.
        a.kvset_until(b"a/00", msgpack.packb(100), lambda: observer.get("a/00") == msgpack.packb(100), "a refresh")
        a.kvset_until(b"a/01", b"", lambda: observer.get("a/01") is None, "a deletion")
        b.kvset_until(b"b/06", msgpack.packb(6), lambda: observer.get("b/06"), "127.0.0.3's key in the room made")
    finally:
        a.close()
        b.close()
    final = counters(observer)
    assert (final["refused_quota"], final["refused_full"], final["keys"]) == (2, 4, 17)  # 16 and the server's own

    result = sectorflow("status", "--config", str(server.path))
    assert result.returncode == 0, result.stderr
    assert ("kvstore/server refused: malformed 0, oversized 0, refused_quota 2, refused_full 4, ttl_clamped 0, "
            "snapshots_dropped 0, errors 0, unauthenticated 0, unauthorised 0, refused_fold 0") in result.stdout.splitlines()
    assert "refused 2 write(s) from an address over its quota, 2 in all; first: update from 127.0.0.2" in server.log()


def test_a_bytes_quota_per_address_is_counted(
    make_config: Callable, processes: Processes, clients: Callable[..., Client]
) -> None:
    server = start_kvstore(make_config, processes, kvstore={"max_map_bytes_per_address": 4096})
    observer = clients(server.config)
    assert observer.wait_synced(SYNC_S)
    peer = RawPeer(server.port, source="127.0.0.4")
    try:
        peer.kvset_until(b"c/0", msgpack.packb(b"v" * 1000), lambda: observer.get("c/0"), "the first value")
        for i in range(1, 5):  # 1006 bytes each (key, body): the fifth passes 4096
            peer.kvset(b"c/%d" % i, msgpack.packb(b"v" * 1000))
        wait_until(lambda: counters(observer).get("refused_quota") == 1, SYNC_S, "one write over the bytes quota")
    finally:
        peer.close()
    assert sorted(observer.subtree("c/")) == ["c/0", "c/1", "c/2", "c/3"]


def test_a_create_only_write_of_a_key_that_exists_is_dropped_and_counted(
    kvstore: KvServer, raw_peer: RawPeer, clients: Callable[..., Client]
) -> None:
    observer = clients(kvstore.config)
    assert observer.wait_synced(SYNC_S)
    published = zmq.Context.instance().socket(zmq.SUB)
    published.linger = 0
    published.subscribe(b"scans/")
    published.connect(f"tcp://127.0.0.1:{kvstore.port + 1}")
    try:
        # The subscription is live once a KVPUB comes through it.
        raw_peer.kvset_until(b"scans/0000000002/claim", msgpack.packb(0), lambda: published.poll(0), "a KVPUB")
        key, first, second = b"scans/0000000003/claim", msgpack.packb("first"), msgpack.packb("second")
        # Any value of the property asks for it; the first one to arrive makes the key.
        raw_peer.kvset_until(key, first, lambda: observer.get(key.decode()) == first, "the first create",
                             properties=b"create=anything\n")
        raw_peer.kvset_until(key, second, lambda: getattr(server_status(observer), "extra", {}).get(
            "creates_refused", 0) >= 1, "a second create refused", properties=b"create=1\n")
        assert observer.get(key.decode()) == first
        # A plain set still overwrites: create-only is the writer's choice, not the key's.
        raw_peer.kvset_until(key, second, lambda: observer.get(key.decode()) == second, "a plain set")
        updates = []
        while published.poll(0):
            updates.append(published.recv_multipart())
        # One KVPUB of the create however often it was sent, then the plain set(s), none with the property.
        ours = [(f[3], f[4]) for f in updates if f[0] == key]
        assert ours[0] == (b"", first) and ours[1:] and set(ours[1:]) == {(b"", second)}, ours
    finally:
        published.close()
