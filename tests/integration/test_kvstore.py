"""Replication through a real `sectorflow kvstore` server: snapshots, ordered updates, ttl expiry,
goodbyes, server restarts and subtrees, seen through our C++ client (bound to Python)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import msgpack
import zmq
from support import Processes, wait_until
from kvstore_support import (  # noqa: F401  (fixtures)
    KvServer,
    clients,
    kvstore,
    server_status,
    start_registering_client,
)

from sectorflow.kvstore import Client, decode_kvmsg
from sectorflow.protocol import NodeGroupRecord, ServiceStatus, nodegroup_key, status_key

SYNC_S = 10.0  # deadline of waits; a failure guard, not a speed requirement


def packed(value: object) -> bytes:
    return msgpack.packb(value)


def test_late_joiner_gets_the_full_state_by_snapshot(kvstore: KvServer, clients: Callable[..., Client]) -> None:
    writer = clients(kvstore.config)
    expected = {f"nodegroups/ng-{i:02d}": packed({"i": i}) for i in range(30)}
    expected.update({status_key("producer", f"r{i}t0"): packed({"state": "idle", "i": i}) for i in range(10)})
    for key, value in expected.items():
        writer.set(key, value)
    wait_until(lambda: all(writer.get(key) == value for key, value in expected.items()), SYNC_S,
               "the writer's keys to come back from the server")

    late = clients(kvstore.config)
    assert late.wait_synced(SYNC_S)
    # Complete as soon as it is synced: the state came with the snapshot, not with later updates.
    assert {key: late.get(key) for key in expected} == expected
    assert late.stats().snapshots == 1


def test_updates_arrive_in_call_order_without_gap(kvstore: KvServer, clients: Callable[..., Client]) -> None:
    context = zmq.Context.instance()
    wire = context.socket(zmq.SUB)
    wire.linger = 0
    wire.subscribe(b"")
    wire.connect(f"tcp://127.0.0.1:{kvstore.port + 1}")
    wait_until(lambda: wire.poll(0), SYNC_S, "the first HUGZ on the raw subscriber")
    observer = clients(kvstore.config)
    assert observer.wait_synced(SYNC_S)
    seen: list[str] = []
    observer.on_change("order/", lambda key, value: seen.append(key))

    writer = clients(kvstore.config)
    # Keys deliberately not in sorted order: the call order must survive.
    keys = [f"order/{(i * 37) % 101:03d}" for i in range(101)]
    for i, key in enumerate(keys):
        writer.set(key, packed(i))
    wait_until(lambda: len(seen) == len(keys), SYNC_S, "101 updates at the observer")
    assert seen == keys
    assert observer.stats().resyncs == 0
    assert observer.stats().stale == 0

    published = []
    while len([key for key, _ in published if key.startswith("order/")]) < len(keys) and wire.poll(2000):
        msg = decode_kvmsg(wire.recv_multipart())
        if msg.key != "HUGZ":
            published.append((msg.key, msg.sequence))
    sequences = [sequence for _, sequence in published]
    assert sequences == list(range(sequences[0], sequences[0] + len(sequences))), "a gap in the server's sequence"
    assert [key for key, _ in published if key.startswith("order/")] == keys
    wire.close()


def test_a_burst_of_writes_larger_than_zeromq_queues_arrives_whole(
    kvstore: KvServer, clients: Callable[..., Client]
) -> None:
    observer = clients(kvstore.config, "burst/")
    assert observer.wait_synced(SYNC_S)
    writer = clients(kvstore.config)
    count = 20_000  # twenty times ZeroMQ's default high-water mark
    for i in range(count):
        writer.set(f"burst/{i:05d}", packed(i))
    wait_until(lambda: len(observer.subtree()) == count, SYNC_S, f"{count} keys at the observer")
    assert observer.get(f"burst/{count - 1:05d}") == packed(count - 1)
    assert observer.stats().resyncs == 0


def test_subtree_replica_holds_only_its_subtree(kvstore: KvServer, clients: Callable[..., Client]) -> None:
    full = clients(kvstore.config)
    statuses = clients(kvstore.config, "status/")
    assert full.wait_synced(SYNC_S) and statuses.wait_synced(SYNC_S)
    changed: list[str] = []
    statuses.on_change("", lambda key, value: changed.append(key))

    writer = clients(kvstore.config)
    writer.set(nodegroup_key("ng-1"), NodeGroupRecord(uid="ng-1", host="127.0.0.1", ports=[1]).encode())
    writer.set_once("acquire/request", packed({"scan": 1}))
    writer.set(status_key("aggregator", "t0"), ServiceStatus(state="idle").encode())
    wait_until(lambda: statuses.get(status_key("aggregator", "t0")) is not None, SYNC_S, "the status in the subtree")
    wait_until(lambda: full.get("acquire/request") and full.get(nodegroup_key("ng-1")), SYNC_S,
               "all keys in the full replica")

    assert all(key.startswith("status/") for key in statuses.subtree())
    assert statuses.get(nodegroup_key("ng-1")) is None and statuses.get("acquire/request") is None
    assert all(key.startswith("status/") for key in changed)
    # HUGZ keep a subtree replica's sequence current with the server's.
    wait_until(lambda: statuses.sequence() == full.sequence(), SYNC_S, "the subtree replica's sequence to catch up")

    late = clients(kvstore.config, "nodegroups/")
    assert late.wait_synced(SYNC_S)
    assert list(late.subtree()) == [nodegroup_key("ng-1")]


def test_killed_client_disappears_from_every_replica_after_its_ttl(
    kvstore: KvServer, clients: Callable[..., Client], processes: Processes, tmp_path: Path
) -> None:
    full = clients(kvstore.config)
    statuses = clients(kvstore.config, "status/producer/")
    assert full.wait_synced(SYNC_S) and statuses.wait_synced(SYNC_S)
    deletions: list[str] = []
    full.on_change("status/producer/", lambda key, value: value is None and deletions.append(key))
    key = status_key("producer", "victim")

    victim = start_registering_client(processes, tmp_path, kvstore.path, "victim")
    wait_until(lambda: full.get(key) and statuses.get(key), SYNC_S, "the victim's registration in both replicas")
    updates_at_start = server_status_updates(full)
    # While it lives it refreshes its key (ttl 1 s, refresh every ttl/3): over several ttl periods
    # the key is never deleted.
    wait_until(lambda: server_status_updates(full) >= updates_at_start + 9, SYNC_S, "nine refreshes by the victim")
    assert deletions == []
    assert full.get(key) is not None

    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    wait_until(lambda: full.get(key) is None and statuses.get(key) is None, SYNC_S,
               "the killed client's key to expire in every replica")
    # The replica changes before the agent calls back: wait for the callback too.
    wait_until(lambda: len(deletions) >= 1, SYNC_S, "the deletion's change callback")
    assert deletions == [key]
    wait_until(lambda: server_status(full).extra["expired"] == 1, SYNC_S, "the server to count one expiry")


def server_status_updates(client: Client) -> int:
    status = server_status(client)
    return 0 if status is None else status.messages


def test_closed_client_deletes_its_own_keys_at_once(kvstore: KvServer, clients: Callable[..., Client]) -> None:
    observer = clients(kvstore.config)
    leaving = Client.from_config(kvstore.config, name="leaving")
    try:
        leaving.set(status_key("aggregator", "t3"), ServiceStatus(state="idle").encode())  # no ttl
        leaving.set_once("acquire/request", packed({"scan": 5}))
        wait_until(lambda: observer.get(status_key("aggregator", "t3")), SYNC_S, "the leaving client's key")
    finally:
        leaving.close()
    wait_until(lambda: observer.get(status_key("aggregator", "t3")) is None, SYNC_S, "the goodbye deletion")
    assert observer.get("acquire/request") == packed({"scan": 5}), "set_once keys outlive their writer"
    assert server_status(observer).extra["expired"] == 0


def test_restarted_server_is_repopulated_by_its_clients(kvstore: KvServer, clients: Callable[..., Client]) -> None:
    registrar = clients(kvstore.config)
    record = NodeGroupRecord(uid="ng-7", host="127.0.0.1", ports=[6200, 6201], status="idle")
    registrar.set(nodegroup_key("ng-7"), record.encode(), kvstore.config.kvstore.ttl_s)
    persistent = clients(kvstore.config)
    persistent.set(status_key("aggregator", "t0"), ServiceStatus(state="streaming", scan=3).encode())
    watcher = clients(kvstore.config)
    wanted = [nodegroup_key("ng-7"), status_key("aggregator", "t0")]
    wait_until(lambda: all(watcher.get(key) for key in wanted), SYNC_S, "both registrations")

    os.killpg(kvstore.process.pid, signal.SIGKILL)  # a crash: no goodbye, no state kept
    kvstore.process.wait()
    kvstore.start()

    fresh = clients(kvstore.config)
    assert fresh.wait_synced(SYNC_S)
    wait_until(lambda: all(fresh.get(key) for key in wanted), SYNC_S, "the clients to re-populate the new server")
    assert NodeGroupRecord.decode(fresh.get(nodegroup_key("ng-7"))) == record
    # The old replica still holds the keys it had: what counts is that it notices the restart,
    # resyncs from the new server and ends up with the keys again.
    wait_until(lambda: watcher.stats().resyncs >= 1, SYNC_S, "the old replica to notice the restart")
    wait_until(lambda: watcher.synced() and all(watcher.get(key) for key in wanted), SYNC_S,
               "the old replica to resync with the new server")
    assert NodeGroupRecord.decode(watcher.get(nodegroup_key("ng-7"))) == record


def test_silent_server_makes_replicas_reconnect_and_resync(kvstore: KvServer, clients: Callable[..., Client]) -> None:
    replica = clients(kvstore.config)
    assert replica.wait_synced(SYNC_S)
    os.killpg(kvstore.process.pid, signal.SIGSTOP)  # alive, connected, but no HUGZ
    try:
        wait_until(lambda: not replica.synced(), SYNC_S, "the replica to notice the silence")
        assert replica.stats().resyncs == 1
    finally:
        os.killpg(kvstore.process.pid, signal.SIGCONT)
    assert replica.wait_synced(SYNC_S)
    assert replica.stats().snapshots == 2


def test_client_started_before_the_server_registers_when_it_comes(
    make_config: Callable, processes: Processes, clients: Callable[..., Client]
) -> None:
    config, path = make_config()
    early = clients(config)
    early.set(status_key("producer", "early"), ServiceStatus(state="idle").encode(), config.kvstore.ttl_s)
    assert not early.synced()

    server = KvServer(config, path, processes)
    server.start()
    observer = clients(config)
    wait_until(lambda: observer.get(status_key("producer", "early")), SYNC_S, "the early client's registration")
    assert early.wait_synced(SYNC_S)
