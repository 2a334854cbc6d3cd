"""The server on the wire: a Clone client written here from the Guide's protocol description
(CHP, ZeroMQ Guide chapter 5) with plain pyzmq and struct, not with our codec or client, and
malformed frames that the server must reject and count without falling over."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

import msgpack
import pytest
import zmq
from support import wait_until
from guide_clone import SYNC_S, GuideClient, kvset_until_published
from kvstore_support import KvServer, clients, kvstore, server_status  # noqa: F401  (fixtures)

from sectorflow.kvstore import Client, is_stack_id
from sectorflow.protocol import ServiceStatus, status_key


@pytest.fixture
def guide_client(kvstore: KvServer) -> Iterator[GuideClient]:
    client = GuideClient(zmq.Context.instance(), kvstore.port)
    yield client
    client.close()


def test_guide_client_snapshots_sets_and_receives_updates(
    kvstore: KvServer, guide_client: GuideClient, clients: Callable[..., Client]
) -> None:
    ours = clients(kvstore.config)
    ours.set(status_key("producer", "r0t0"), ServiceStatus(state="idle", scan=4).encode())
    wait_until(lambda: ours.get(status_key("producer", "r0t0")), SYNC_S, "our client's key")

    # Subscription first, then the snapshot, as the Guide's client does.
    guide_client.recv(guide_client.subscriber, SYNC_S)
    guide_client.get_snapshot()
    decoded = ServiceStatus.decode(guide_client.kvmap[b"status/producer/r0t0"])
    assert (decoded.state, decoded.scan) == ("idle", 4)
    assert guide_client.sequence >= 2

    # Guide client -> server -> our replica.
    body = msgpack.packb({"from": "guide"})
    props, sequence, _ = kvset_until_published(guide_client, b"guide/key", body)
    assert sequence > 0 and props == b""
    wait_until(lambda: ours.get("guide/key") == body, SYNC_S, "the guide client's key in our replica")

    # Our client -> server -> guide client, with the next sequence number.
    ours.set("ours/key", msgpack.packb(7))
    for _ in range(100):
        key, new_sequence, _, got = guide_client.next_update()
        if key == b"ours/key":
            break
    assert got == msgpack.packb(7) and new_sequence > sequence


def test_guide_client_ttl_expires_and_the_deletion_is_published(
    guide_client: GuideClient, kvstore: KvServer
) -> None:
    guide_client.recv(guide_client.subscriber, SYNC_S)
    guide_client.get_snapshot()
    props, sequence, _ = kvset_until_published(guide_client, b"ephemeral", msgpack.packb(1), ttl_s=1)
    assert props == b"ttl=1\n"
    for _ in range(100):  # a resent KVSET's second KVPUB may come before the deletion
        key, deleted_at, _, body = guide_client.next_update()
        if key == b"ephemeral" and not body:
            break
    assert body == b"" and deleted_at > sequence
    assert b"ephemeral" not in guide_client.kvmap


def test_snapshot_of_a_subtree_holds_only_that_subtree_and_the_servers_status(
    kvstore: KvServer, clients: Callable[..., Client]
) -> None:
    writer = clients(kvstore.config)
    for key in ("nodegroups/a", "nodegroups/b", "status/producer/r0t0", "acquire/request"):
        writer.set(key, msgpack.packb(key))
    wait_until(lambda: len(writer.subtree("nodegroups/")) == 2 and writer.get("acquire/request"), SYNC_S,
               "the writer's keys")
    guide = GuideClient(zmq.Context.instance(), kvstore.port, subtree=b"nodegroups/")
    try:
        guide.get_snapshot()
        # The server's status comes with every snapshot: its stack_id names the stack (SPEC, "Wire").
        assert sorted(guide.kvmap) == [b"nodegroups/a", b"nodegroups/b", b"status/kvstore/server"]
        stack = ServiceStatus.decode(guide.kvmap[b"status/kvstore/server"]).extra["stack_id"]
        assert is_stack_id(stack) and stack == writer.stack_id
    finally:
        guide.close()


def test_malformed_frames_are_rejected_and_counted(
    kvstore: KvServer, guide_client: GuideClient, clients: Callable[..., Client]
) -> None:
    observer = clients(kvstore.config)
    assert observer.wait_synced(SYNC_S)
    guide_client.recv(guide_client.subscriber, SYNC_S)
    guide_client.get_snapshot()
    kvset_until_published(guide_client, b"before", msgpack.packb(1))  # the PUB is connected now

    seq0 = struct.pack("!q", 0)
    malformed = [
        [b"wrong/count", seq0, b""],  # 3 frames instead of 5
        [b"short/sequence", b"\x00\x01\x02\x03", b"", b"", msgpack.packb(1)],  # 4-byte sequence
        [b"bad/body", seq0, b"", b"", b"\xc1"],  # 0xc1 is never valid msgpack
    ]
    for frames in malformed:
        guide_client.publisher.send_multipart(frames)
    guide_client.snapshot.send_multipart([b"GIMME"])  # not ICANHAZ? on the snapshot port
    kvset_until_published(guide_client, b"after", msgpack.packb(2))  # sent after the bad ones: they were read

    wait_until(lambda: server_status(observer).extra["malformed"] == 4, SYNC_S, "the server to count 4 malformed")
    assert kvstore.process.poll() is None
    for key in ("wrong/count", "short/sequence", "bad/body"):
        assert observer.get(key) is None
    assert observer.get("after") == msgpack.packb(2)
    wait_until(lambda: "malformed message(s), 4 in all; last: " in kvstore.log(), SYNC_S,
               "the daemon to log the rejections")
