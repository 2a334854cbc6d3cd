"""CURVE and ZAP on every port, and the kvstore's authorisation by key prefix, against real
services: the kvstore and the aggregator as processes, a NodeGroup's sockets in this process, and
peers made with plain pyzmq (tests/handshake.py) holding no key, a stranger's key, or the key of
another role (kvstore/SPEC.md and protocol/SPEC.md, "Security")."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest
import zmq
from handshake import REFUSED, SUCCEEDED, Curve, handshake
from keyring import Keyring, clients, keyring  # noqa: F401 (fixtures)
from kvstore_support import KvServer, server_status
from support import Processes, wait_until

from sectorflow.configs import Config
from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import NodeGroup
from sectorflow.consumer.nodegroup.nodegroup_service import settings_from
from sectorflow.protocol import (
    DataHeader,
    InfoMessage,
    NodeGroupRecord,
    ScanRequestRecord,
    ServiceStatus,
    encode_header,
    encode_info,
    nodegroup_key,
    status_key,
)

SYNC_S = 20.0  # deadline of waits; a failure guard, not a speed requirement
SCAN = "scans/0000000001"



@pytest.fixture
def secured(make_config: Callable, keyring: Keyring) -> Callable[..., tuple[Config, Path]]:
    """``secured(**overrides)``: make_config with [security] on over the keyring's beamline keys.
    Strangers to admit must be made (``keyring.stranger(..., admitted=True)``) before a service starts."""

    def make(**overrides: object) -> tuple[Config, Path]:
        return make_config(security={"enabled": True, "key_dir": str(keyring.beamline)}, **overrides)

    return make



def start_kvstore(config: Config, path: Path, processes: Processes) -> KvServer:
    server = KvServer(config, path, processes)
    server.start()
    return server


def kv_status(viewer: Client) -> ServiceStatus:
    status = server_status(viewer)
    assert status is not None
    return status


def packed(value: object) -> bytes:
    return msgpack.packb(value)


def test_every_kvstore_port_refuses_no_key_a_strangers_key_and_the_servers_own(
        secured, keyring: Keyring, processes: Processes, clients) -> None:
    config, path = secured()
    server = start_kvstore(config, path, processes)
    keyring.stranger("mallory", "viewer")
    mallory = keyring.stranger_pair("mallory", "viewer")
    kvstore_key = keyring.public("kvstore")
    sockets = {0: zmq.DEALER, 1: zmq.SUB, 2: zmq.PUB}  # what a client connects to P, P+1, P+2
    for offset, socket_type in sockets.items():
        endpoint = f"tcp://127.0.0.1:{config.kvstore.port + offset}"
        assert handshake(endpoint, socket_type, None) == REFUSED, f"no key on P+{offset}"
        assert handshake(endpoint, socket_type, Curve(*mallory, kvstore_key)) == REFUSED, f"stranger on P+{offset}"
        # The server's own pair is no client role's: not in the allowlist.
        assert handshake(endpoint, socket_type, Curve(*keyring.pair("kvstore"), kvstore_key)) == REFUSED
        assert handshake(endpoint, socket_type, Curve(*keyring.pair("viewer"), kvstore_key)) == SUCCEEDED
    viewer = clients(config, "viewer")
    # Two known-bad keys on three ports: six handshakes refused by the ZAP handler, each key logged
    # once; and three peers without a key, refused by libzmq before ZAP and seen by the socket
    # monitors (a peer may have retried before it closed: at least nine).
    wait_until(lambda: kv_status(viewer).extra.get("unauthenticated", 0) >= 9, SYNC_S, "9 refusals in the status")
    wait_until(lambda: mallory[0] in server.log(), SYNC_S, "the stranger's key in the log")
    assert server.log().count(mallory[0]) == 1
    assert server.log().count(keyring.public("kvstore") + " (unknown key)") == 1
    for offset in sockets:
        endpoint = f"tcp://127.0.0.1:{config.kvstore.port + offset}"
        wait_until(lambda: f"refused a peer on {endpoint} " in server.log(), SYNC_S, f"the keyless peer on {endpoint}")
        assert server.log().count(f"refused a peer on {endpoint} ") == 1
    assert mallory[1] not in server.log() and keyring.pair("kvstore")[1] not in server.log()


def test_aggregator_ports_admit_only_producer_keys(secured, keyring: Keyring, processes: Processes, clients) -> None:
    config, path = secured()
    start_kvstore(config, path, processes)
    aggregator = processes.sectorflow("aggregator", "--config", str(path), name="aggregator")
    wait_until(lambda: aggregator.poll() is not None or "state starting -> idle" in processes.output(aggregator),
               SYNC_S, "the aggregator to serve")
    assert aggregator.poll() is None, processes.output(aggregator)
    keyring.stranger("mallory", "producer")
    mallory = keyring.stranger_pair("mallory", "producer")
    server_key = keyring.public("aggregator")
    for r in (0, config.n_receivers - 1):
        endpoint = f"tcp://127.0.0.1:{config.aggregator.base_port + r}"
        assert handshake(endpoint, zmq.PUSH, None) == REFUSED
        assert handshake(endpoint, zmq.PUSH, Curve(*mallory, server_key)) == REFUSED
        for role in ("nodegroup", "operator", "viewer", "aggregator"):  # another role's key
            assert handshake(endpoint, zmq.PUSH, Curve(*keyring.pair(role), server_key)) == REFUSED, role
        assert handshake(endpoint, zmq.PUSH, Curve(*keyring.pair("producer"), server_key)) == SUCCEEDED
    viewer = clients(config, "viewer")

    def refused() -> int:
        raw = viewer.get(status_key("aggregator", "t0"))
        return 0 if raw is None else ServiceStatus.decode(raw).extra.get("unauthenticated", 0)

    # Five keys refused by ZAP and one keyless peer on each of two ports (at least: a peer may retry).
    wait_until(lambda: refused() >= 12, SYNC_S, "12 refused handshakes in the aggregator status")
    wait_until(lambda: mallory[0] in processes.output(aggregator), SYNC_S, "the stranger's key in the log")
    assert processes.output(aggregator).count(mallory[0]) == 1


def test_nodegroup_ports_complete_a_handshake_only_with_the_aggregators_key(secured, keyring: Keyring) -> None:
    config, _ = secured()
    group = NodeGroup(settings_from(config, "ng-secure", counting_threads=1))
    try:
        keyring.stranger("mallory", "aggregator")
        mallory = keyring.stranger_pair("mallory", "aggregator")
        for port in group.ports:
            endpoint = f"tcp://127.0.0.1:{port}"
            assert handshake(endpoint, zmq.PUSH, None) == REFUSED
            # A CURVE server without the aggregator's secret, with a stranger's or another role's key.
            assert handshake(endpoint, zmq.PUSH, Curve(*mallory)) == REFUSED
            assert handshake(endpoint, zmq.PUSH, Curve(*keyring.pair("producer"))) == REFUSED
            # A CURVE client, even one that knows the aggregator's public key.
            assert handshake(endpoint, zmq.PUSH, Curve(*mallory, keyring.public("aggregator"))) == REFUSED
            assert handshake(endpoint, zmq.PUSH, Curve(*keyring.pair("aggregator"))) == SUCCEEDED
    finally:
        group.stop()


def write_then_mark(client: Client, writes: list[tuple[str, bytes | None]], mark: str) -> None:
    """Send ``writes`` (None erases) then an allowed ``mark``: writes reach the server in order, so
    once the mark is published every write before it was decided."""
    for key, value in writes:
        if value is None:
            client.erase(key)
        else:
            client.set_once(key, value)
    client.set_once(mark, packed(mark))


def test_the_kvstore_lets_each_role_write_only_its_own_keys(secured, keyring: Keyring, processes: Processes,
                                                           clients) -> None:
    ng2_dir = keyring.stranger("ng2", "nodegroup", admitted=True)  # a second job's key, known to the beamline
    config, path = secured()
    start_kvstore(config, path, processes)
    viewer = clients(config, "viewer")
    nodegroup = clients(config, "nodegroup")
    producer = clients(config, "producer")
    operator = clients(config, "operator")
    aggregator = clients(config, "aggregator")
    other_job = clients(config, "nodegroup", ng2_dir)

    def shows(key: str) -> bool:
        return viewer.get(key) is not None

    # The scan the parts below belong to: a scan's parts are taken only once it was requested.
    request = ScanRequestRecord(scan_number=1, scan_x=4, scan_y=4, source="simulator", routing=["ng-1"],
                                producer_threads=[1, 1], requested_s=1.0)
    operator.set_once(f"{SCAN}/request", request.encode())
    wait_until(lambda: shows(f"{SCAN}/request"), SYNC_S, "the scan's request")
    # Allowed: each role's own prefixes.
    write_then_mark(nodegroup, [("nodegroups/ng-1", packed(1)), (f"{SCAN}/nodegroup/ng-1", packed(1))],
                    "status/nodegroup/ng-1")
    write_then_mark(operator, [("acquire/request", packed("op"))], "acquire/mark")
    write_then_mark(aggregator, [(f"{SCAN}/aggregator/t0", packed(1))], "status/aggregator/t0")
    wait_until(lambda: all(shows(k) for k in ("status/nodegroup/ng-1", "acquire/mark", "status/aggregator/t0")),
               SYNC_S, "the allowed writes")
    assert all(shows(k) for k in ("nodegroups/ng-1", f"{SCAN}/nodegroup/ng-1", "acquire/request",
                                  f"{SCAN}/aggregator/t0"))

    # Refused: a fake NodeGroup with a producer's key, a producer commanding or writing another
    # service's status or a NodeGroup's file record, and deleting a registration.
    write_then_mark(producer, [("nodegroups/fake", packed(1)), ("acquire/request", packed("evil")),
                               ("status/aggregator/t1", packed(1)), (f"{SCAN}/file", packed(1)),
                               ("nodegroups/ng-1", None), ("flood/x", packed(1))], "status/producer/r0t0")
    # Another NodeGroup job may neither take over nor delete the first's registration.
    write_then_mark(other_job, [("nodegroups/ng-1", packed(2)), ("nodegroups/ng-1", None)], "nodegroups/ng-2")
    # A viewer reads only; the aggregator may not register a NodeGroup.
    write_then_mark(viewer, [("status/producer/r1t0", packed(1))], "nodegroups/never")
    write_then_mark(aggregator, [("nodegroups/fake2", packed(1))], f"{SCAN}/aggregator/t1")
    wait_until(lambda: shows("status/producer/r0t0") and shows("nodegroups/ng-2") and shows(f"{SCAN}/aggregator/t1"),
               SYNC_S, "the marks after the refused writes")
    for key in ("nodegroups/fake", "status/aggregator/t1", f"{SCAN}/file", "flood/x", "status/producer/r1t0",
                "nodegroups/fake2"):
        assert not shows(key), key
    assert msgpack.unpackb(viewer.get("acquire/request")) == "op"
    assert msgpack.unpackb(viewer.get("nodegroups/ng-1")) == 1
    # The viewer's mark itself was refused too: 6 + 2 + 2 + 1 refusals, counted in the status.
    wait_until(lambda: kv_status(viewer).extra.get("unauthorised") == 11, SYNC_S, "11 unauthorised writes counted")
    assert not shows("nodegroups/never")
    # The holder may still delete its own registration.
    nodegroup.erase("nodegroups/ng-1")
    wait_until(lambda: not shows("nodegroups/ng-1"), SYNC_S, "the holder's deletion")


def test_a_viewer_writes_only_its_own_libertem_status_and_the_bridge_publishes_there(
        secured, keyring: Keyring, processes: Processes, clients) -> None:
    carol_dir = keyring.stranger("carol", "viewer", admitted=True)  # a second screen's viewer key
    config, path = secured()
    start_kvstore(config, path, processes)
    operator = clients(config, "operator")
    carol = clients(config, "viewer", carol_dir)

    # The bridge connects with this host's viewer key (bob's) and publishes under its name.
    bridge = processes.sectorflow("libertem", "--config", str(path), "--listen", "127.0.0.1:0", name="libertem")
    published = wait_until(lambda: operator.statuses("libertem"), SYNC_S, "the bridge's status")
    assert list(published) == [("libertem", "bob")]
    assert published[("libertem", "bob")].extra["client_connected"] is False

    # Another viewer may not write the bridge's key nor make up others; its own name it may.
    write_then_mark(carol, [("status/libertem/bob", packed(1)), ("status/libertem/mallory", packed(1)),
                            ("status/libertem/carol/x", packed(1)), ("status/nodegroup/carol", packed(1))],
                    "status/libertem/carol")
    wait_until(lambda: operator.get("status/libertem/carol") is not None, SYNC_S, "carol's own status")
    for key in ("status/libertem/mallory", "status/libertem/carol/x", "status/nodegroup/carol"):
        assert operator.get(key) is None, key
    assert ServiceStatus.decode(operator.get("status/libertem/bob")).state == "idle"
    wait_until(lambda: kv_status(operator).extra.get("unauthorised") == 4, SYNC_S, "4 unauthorised writes counted")

    assert processes.stop(bridge) == 0, processes.output(bridge)[-3000:]
    assert "served: scans_served 0" in processes.output(bridge)


def acquire(config_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", "acquire", "--config", str(config_path),
                           "--scan-number", "7", "--scan-shape", "4x4"], capture_output=True, text=True, timeout=120)


def test_acquire_without_an_operator_key_fails_and_requests_nothing(secured, keyring: Keyring, processes: Processes,
                                                                  clients, tmp_path: Path) -> None:
    carol = keyring.stranger("carol", "viewer", admitted=True)  # known to the beamline, but only to look
    config, path = secured()
    start_kvstore(config, path, processes)
    carol_config = tmp_path / "carol.toml"
    carol_config.write_text(path.read_text().replace(str(keyring.beamline), str(carol)))
    # No operator key on this host: refused before anything is sent.
    result = acquire(carol_config)
    assert result.returncode == 1
    assert result.stderr.strip().endswith("no secret key of role operator (*.key_secret); make one with "
                                          "'sectorflow keys generate operator NAME' on this host")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    # Carol's viewer pair filed as an operator's: the kvstore knows the key as a viewer's and refuses
    # the first write, the claim of the scan number; nothing is requested after it.
    (carol / "operator").mkdir()
    (carol / "viewer" / "carol.key_secret").rename(carol / "operator" / "carol.key_secret")
    result = acquire(carol_config)
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("sectorflow acquire: error: scan 7: the kvstore did not take the claim of the number"), error
    assert "only an operator's key may write it" in error
    viewer = clients(config, "viewer")
    assert viewer.get("acquire/request") is None and viewer.get("scans/0000000007/request") is None
    assert viewer.get("scans/0000000007/claim") is None
    wait_until(lambda: kv_status(viewer).extra.get("unauthorised") == 1, SYNC_S, "the refused claim counted")


def test_the_aggregator_sends_no_sector_to_a_listener_without_a_nodegroup_key(
        secured, keyring: Keyring, processes: Processes, clients) -> None:
    config, path = secured(detector={"frame_rows": 32, "frame_cols": 32, "sector_rows": 8, "sector_cols": 32},
                           receivers=[{"host": "127.0.0.1", "threads": 1}] * 4)
    start_kvstore(config, path, processes)
    aggregator = processes.sectorflow("aggregator", "--config", str(path), name="aggregator")
    wait_until(lambda: aggregator.poll() is not None or "state starting -> idle" in processes.output(aggregator),
               SYNC_S, "the aggregator to serve")
    keyring.stranger("mallory", "nodegroup")
    mallory = keyring.stranger_pair("mallory", "nodegroup")
    with zmq.Context() as context, context.socket(zmq.PULL) as rogue, context.socket(zmq.PUSH) as push:
        # A listener posing as a NodeGroup: it knows the aggregator's public key, not a beamline key.
        rogue.linger = 0
        rogue.curve_serverkey = keyring.public("aggregator").encode()
        rogue.curve_publickey, rogue.curve_secretkey = mallory[0].encode(), mallory[1].encode()
        port = rogue.bind_to_random_port("tcp://127.0.0.1")
        # A registration pointing at it, as a forged or hijacked NodeGroup registration would.
        registrar = clients(config, "nodegroup")
        registrar.set_once(nodegroup_key("rogue"), NodeGroupRecord(uid="rogue", host="127.0.0.1",
                                                                   ports=[port] * 4).encode())
        viewer = clients(config, "viewer")
        wait_until(lambda: viewer.get(nodegroup_key("rogue")) is not None, SYNC_S, "the registration")
        # A real producer (its key) streams a scan routed to it.
        push.linger = 0
        push.curve_serverkey = keyring.public("aggregator").encode()
        public, secret = keyring.pair("producer")
        push.curve_publickey, push.curve_secretkey = public.encode(), secret.encode()
        push.connect(f"tcp://127.0.0.1:{config.aggregator.base_port}")
        push.send(encode_info(InfoMessage(scan_number=1, receiver=0, thread_id=0, scan_x=2, scan_y=2,
                                          routing=["rogue"], counts={"rogue": 4})))
        for frame in range(4):
            header = DataHeader(scan_number=1, frame_number=frame, sector=0, scan_x=2, scan_y=2,
                                position_x=frame % 2, position_y=frame // 2, thread_id=0)
            push.send_multipart([encode_header(header), bytes(config.detector.sector_bytes)])

        def refused() -> int:
            raw = viewer.get(status_key("aggregator", "t0"))
            return 0 if raw is None else ServiceStatus.decode(raw).extra.get("unauthenticated", 0)

        wait_until(lambda: refused() >= 1, SYNC_S, "the aggregator to refuse the listener's key")
        wait_until(lambda: mallory[0] in processes.output(aggregator), SYNC_S, "the refusal in the log")
        # The relay queues only for an authenticated connection (ZMQ_IMMEDIATE): nothing ever left.
        assert rogue.poll(0) == 0



def test_a_producer_key_named_for_a_receiver_writes_only_that_receivers_records(
        secured, keyring: Keyring, processes: Processes, clients) -> None:
    """Once, any producer key took every receiver's records, racing the real producers (their
    writes refused as held by it, and acquire said the scan was never taken)."""
    receiver_1 = keyring.stranger("receiver-1", "producer", admitted=True)
    config, path = secured()
    start_kvstore(config, path, processes)
    viewer = clients(config, "viewer")
    intruder = clients(config, "producer", receiver_1)
    request = ScanRequestRecord(scan_number=1, scan_x=4, scan_y=4, source="simulator", routing=[],
                                producer_threads=[1, 1, 1], requested_s=1.0)
    clients(config, "operator").set_once(f"{SCAN}/request", request.encode())
    wait_until(lambda: viewer.get(f"{SCAN}/request") is not None, SYNC_S, "the scan's request")
    write_then_mark(intruder, [(f"{SCAN}/producer/r0t0", packed("taken")), ("status/producer/r2t0", packed(1)),
                               (f"{SCAN}/producer/r11t0", packed("taken"))], f"{SCAN}/producer/r1t0")
    wait_until(lambda: viewer.get(f"{SCAN}/producer/r1t0") is not None, SYNC_S, "receiver 1's own record")
    for key in (f"{SCAN}/producer/r0t0", "status/producer/r2t0", f"{SCAN}/producer/r11t0"):
        assert viewer.get(key) is None, key
    wait_until(lambda: kv_status(viewer).extra.get("unauthorised") == 3, SYNC_S, "3 unauthorised writes counted")
    # The receiver whose record it tried to take writes it, as it would have anyway.
    clients(config, "producer").set_once(f"{SCAN}/producer/r0t0", packed("mine"))
    wait_until(lambda: viewer.get(f"{SCAN}/producer/r0t0") == packed("mine"), SYNC_S, "receiver 0's own record")


def test_a_scans_parts_name_only_what_its_request_has(secured, keyring: Keyring, processes: Processes,
                                                      clients) -> None:
    """Once, one producer key wrote millions of records for a receiver that does not exist (and
    for scans never requested); the room they took evicted the stack's history."""
    config, path = secured()
    start_kvstore(config, path, processes)
    viewer = clients(config, "viewer")
    producer = clients(config, "producer")
    aggregator = clients(config, "aggregator")
    nodegroup = clients(config, "nodegroup")
    operator = clients(config, "operator")
    # Scan 9 was never requested: nothing has a part of it.
    write_then_mark(producer, [("scans/0000000009/producer/r0t0", packed(1))], "status/producer/r0t0")
    wait_until(lambda: viewer.get("status/producer/r0t0") is not None, SYNC_S, "the producer's mark")
    request = ScanRequestRecord(scan_number=1, scan_x=4, scan_y=4, source="simulator", routing=["ng-1"],
                                producer_threads=[2, 1], requested_s=1.0)
    operator.set_once(f"{SCAN}/request", request.encode())
    wait_until(lambda: viewer.get(f"{SCAN}/request") is not None, SYNC_S, "the scan's request")
    # Receivers 0 (two threads) and 1 (one), one relay thread each, NodeGroup ng-1: nothing else.
    write_then_mark(producer, [(f"{SCAN}/producer/r9t0", packed(1)), (f"{SCAN}/producer/r1t1", packed(1)),
                               (f"{SCAN}/producer/x", packed(1)), (f"{SCAN}/producer/r0t1", packed(1))],
                    f"{SCAN}/producer/r1t0")
    write_then_mark(aggregator, [(f"{SCAN}/aggregator/t2", packed(1))], f"{SCAN}/aggregator/t1")
    write_then_mark(nodegroup, [(f"{SCAN}/nodegroup/ng-7", packed(1))], f"{SCAN}/nodegroup/ng-1")
    wait_until(lambda: all(viewer.get(f"{SCAN}/{part}") is not None
                           for part in ("producer/r1t0", "aggregator/t1", "nodegroup/ng-1", "producer/r0t1")),
               SYNC_S, "the parts the request names")
    for key in ("scans/0000000009/producer/r0t0", f"{SCAN}/producer/r9t0", f"{SCAN}/producer/r1t1",
                f"{SCAN}/producer/x", f"{SCAN}/aggregator/t2", f"{SCAN}/nodegroup/ng-7"):
        assert viewer.get(key) is None, key
    wait_until(lambda: kv_status(viewer).extra.get("unauthorised") == 6, SYNC_S, "6 unauthorised writes counted")

def test_a_producer_keys_flood_of_statuses_for_threads_the_stack_lacks_is_refused_and_history_stays(
        secured, processes: Processes, clients) -> None:
    """A status record is named r<receiver>t<thread>, bounded in receivers by a key's
    name but not in threads, so one producer key wrote millions of statuses and their room evicted the
    stack's history. With a room of 64 keys, a flood three times that for a thread and a receiver the
    stack does not have is refused and counted, and the scan and the real statuses stay."""
    config, path = secured(kvstore={"max_stack_keys": 64})
    server = start_kvstore(config, path, processes)
    viewer = clients(config, "viewer")
    producer = clients(config, "producer")
    request = ScanRequestRecord(scan_number=1, scan_x=4, scan_y=4, source="simulator", routing=[],
                                producer_threads=[1, 1, 1, 1], requested_s=1.0)
    clients(config, "operator").set_once(f"{SCAN}/request", request.encode())
    write_then_mark(producer, [], "status/producer/r0t0")
    wait_until(lambda: viewer.get(f"{SCAN}/request") is not None and viewer.get("status/producer/r0t0") is not None,
               SYNC_S, "the scan's request and the real producer's status")
    flood = [(f"status/producer/r0t{thread}", packed("flood")) for thread in range(1, 97)]
    flood += [(f"status/producer/r9t{thread}", packed("flood")) for thread in range(96)]
    write_then_mark(producer, flood, "status/producer/r3t0")
    wait_until(lambda: viewer.get("status/producer/r3t0") is not None, SYNC_S, "the producer's mark after the flood")
    status = wait_until(lambda: (s := kv_status(viewer)).extra.get("unauthorised") == len(flood) and s, SYNC_S,
                        f"{len(flood)} unauthorised writes counted")
    assert status.extra["scans_evicted"] == 0 and status.extra["refused_full"] == 0
    assert sorted(viewer.values("status/producer/")) == ["status/producer/r0t0", "status/producer/r3t0"]
    wait_until(lambda: "kvmsg 'status/producer/r0t1' refused: receiver 0 has no producer thread 1 (1 threads, "
               "[[receivers]] threads)" in server.log(), SYNC_S, "the first refusal, named, in the server's log")
    assert viewer.get(f"{SCAN}/request") == request.encode()
    # The real producer's status is still its own to write.
    producer.set_once("status/producer/r0t0", packed("streaming"))
    wait_until(lambda: viewer.get("status/producer/r0t0") == packed("streaming"), SYNC_S, "the real status rewritten")

def test_a_tier_member_is_an_aggregator_key_and_a_scans_relay_records_come_from_its_members_only(
        secured, keyring: Keyring, processes: Processes, clients) -> None:
    """With an aggregation tier, a producer key cannot make a member look up (its status is
    what ``acquire`` reads the scan's members from) nor take a member's lease (what the standby
    waits for), and a scan's relay records are taken only for the relay threads of the members its
    request lists."""
    config, path = secured(aggregator={"tier": ["127.0.0.1"] * 3})
    start_kvstore(config, path, processes)
    viewer = clients(config, "viewer")
    producer = clients(config, "producer")
    aggregator = clients(config, "aggregator")
    operator = clients(config, "operator")
    # Two receivers: member m's relay threads are 2m and 2m + 1. Member 1 is down: the scan goes without it.
    request = ScanRequestRecord(scan_number=1, scan_x=4, scan_y=4, source="simulator", routing=["ng-1"],
                                producer_threads=[1, 1], requested_s=1.0)
    request.tier = [0, 2]
    operator.set_once(f"{SCAN}/request", request.encode())
    wait_until(lambda: viewer.get(f"{SCAN}/request") is not None, SYNC_S, "the scan's request")
    write_then_mark(producer, [("status/aggregator/t2", packed(1)), ("status/aggregator/t3", packed(1)),
                               ("status/aggregator/active-1", packed(1))], "status/producer/r0t0")
    write_then_mark(aggregator, [(f"{SCAN}/aggregator/t2", packed(1)), (f"{SCAN}/aggregator/t3", packed(1)),
                                 (f"{SCAN}/aggregator/t6", packed(1)), (f"{SCAN}/aggregator/t4", packed(1))],
                    f"{SCAN}/aggregator/t5")
    wait_until(lambda: viewer.get("status/producer/r0t0") is not None and viewer.get(f"{SCAN}/aggregator/t5")
               is not None, SYNC_S, "the marks")
    assert viewer.get(f"{SCAN}/aggregator/t4") is not None
    for key in ("status/aggregator/t2", "status/aggregator/t3", "status/aggregator/active-1",
                f"{SCAN}/aggregator/t2", f"{SCAN}/aggregator/t3", f"{SCAN}/aggregator/t6"):
        assert viewer.get(key) is None, key
    wait_until(lambda: kv_status(viewer).extra.get("unauthorised") == 6, SYNC_S, "6 unauthorised writes counted")


def test_a_scans_file_record_is_written_only_by_the_job_its_routing_named(secured, keyring: Keyring,
                                                                          processes: Processes, clients) -> None:
    """Once, an admitted NodeGroup key of another job rewrote any scan's file record, and status
    then showed a complete scan as failed."""
    ng2_dir = keyring.stranger("ng2", "nodegroup", admitted=True)
    config, path = secured()
    start_kvstore(config, path, processes)
    viewer = clients(config, "viewer")
    job = clients(config, "nodegroup")
    other_job = clients(config, "nodegroup", ng2_dir)
    operator = clients(config, "operator")
    request = ScanRequestRecord(scan_number=1, scan_x=4, scan_y=4, source="simulator", routing=["ng-1"],
                                producer_threads=[1], requested_s=1.0)
    write_then_mark(job, [], "nodegroups/ng-1")
    write_then_mark(other_job, [], "nodegroups/ng-2")
    # A file record before the scan's request (it turned the scan's data away when it came).
    write_then_mark(other_job, [(f"{SCAN}/file", packed("early"))], "status/nodegroup/ng-2-early")
    wait_until(lambda: viewer.get("status/nodegroup/ng-2-early") is not None, SYNC_S, "the early writer's mark")
    assert viewer.get(f"{SCAN}/file") is None
    operator.set_once(f"{SCAN}/request", request.encode())
    wait_until(lambda: viewer.get(f"{SCAN}/request") == request.encode() and viewer.get("nodegroups/ng-2") is not None,
               SYNC_S, "the request and both jobs' registrations")

    write_then_mark(job, [(f"{SCAN}/file", packed("whole"))], "status/nodegroup/ng-1")
    wait_until(lambda: viewer.get("status/nodegroup/ng-1") is not None, SYNC_S, "the routed job's writes")
    assert msgpack.unpackb(viewer.get(f"{SCAN}/file")) == "whole"
    # The other job, admitted and registered, may neither rewrite nor delete the file record.
    write_then_mark(other_job, [(f"{SCAN}/file", packed("failed")), (f"{SCAN}/file", None)], "status/nodegroup/ng-2")
    wait_until(lambda: viewer.get("status/nodegroup/ng-2") is not None, SYNC_S, "the other job's writes")
    assert msgpack.unpackb(viewer.get(f"{SCAN}/file")) == "whole"
    wait_until(lambda: kv_status(viewer).extra.get("unauthorised") == 3, SYNC_S, "3 unauthorised writes counted")
    # A replay routed over the other job's NodeGroup hands the file record to that job.
    replay = ScanRequestRecord(scan_number=1, scan_x=4, scan_y=4, source="replay", routing=["ng-2"],
                               producer_threads=[1], requested_s=2.0)
    operator.set_once(f"{SCAN}/request", replay.encode())
    wait_until(lambda: viewer.get(f"{SCAN}/request") == replay.encode(), SYNC_S, "the replay's request")
    other_job.set_once(f"{SCAN}/file", packed("merged"))
    wait_until(lambda: viewer.get(f"{SCAN}/file") == packed("merged"), SYNC_S, "the replaying job's file record")
