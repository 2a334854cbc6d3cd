"""The kvstore pair with `[security]` on (kvstore/SPEC.md, "The pair", "Security"): two real
`sectorflow kvstore --pair` processes on loopback over one beamline's keys. The backup mirrors the
primary through CurveZMQ with the kvstore key; killed, the primary hands over to the backup, which
judges every write it held and every write after by its writer's role and holds each key for the
identity that wrote it on the primary. The peer link admits the kvstore key alone: no key, a
stranger's or a client role's is refused and counted, a peer without the kvstore secret cannot
move the primary's state machine, and the real backup started after such a peer is heard."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message
from handshake import REFUSED, SUCCEEDED, Curve, handshake
from harness import free_port_block
from keyring import Keyring, clients, keyring  # noqa: F401 (fixtures)
from kvstore_support import KvServer, server_status
from support import LOOPBACK, Processes, wait_until
from test_kvstore_pair_servers import PAIR_PORTS, SNAPSHOT_TAKEN, address, kill, start_pair, stopped

from sectorflow.configs import Config
from sectorflow.kvstore import SERVER_FIELD, Client
from sectorflow.protocol import ServiceStatus, status_key

SYNC_S = 20.0  # deadline of waits; a failure guard, not a speed requirement
# A ZMTP 3.0 greeting (rfc.zeromq.org/spec:23): signature, version 3.0, mechanism NULL, as-server 0, filler.
NULL_GREETING = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + bytes(31)



@pytest.fixture
def secured_pair(make_config: Callable, keyring: Keyring, tmp_path: Path) -> Callable[[], tuple[Config, Path]]:
    """``secured_pair()``: a pair's configuration with [security] on over the keyring's beamline keys.
    Strangers to admit must be made before it is called (services read the allowlists at start)."""

    def make() -> tuple[Config, Path]:
        first = free_port_block(LOOPBACK, 2 * PAIR_PORTS)
        return make_config(security={"enabled": True, "key_dir": str(keyring.beamline)},
                           kvstore={"servers": [f"{LOOPBACK}:{first}", f"{LOOPBACK}:{first + PAIR_PORTS}"],
                                    "log_dir": str(tmp_path / "kvlog")})

    return make



def packed(value: object) -> bytes:
    return msgpack.packb(value)


def kv_status(reader: Client) -> ServiceStatus:
    status = server_status(reader)
    assert status is not None
    return status


def test_a_secured_pair_fails_over_with_every_writer_judged_by_its_role_and_its_keys_still_held(
        secured_pair, keyring: Keyring, processes: Processes, clients) -> None:
    ng2_dir = keyring.stranger("ng2", "nodegroup", admitted=True)  # a second NodeGroup job's key
    config, path = secured_pair()
    primary, backup = start_pair(config, path, processes)
    # A C++ kvstore agent in a service: the aggregator writes its relay threads' statuses.
    aggregator = processes.sectorflow("aggregator", "--config", str(path), name="aggregator")
    viewer = clients(config, "viewer")
    nodegroup = clients(config, "nodegroup")
    other_job = clients(config, "nodegroup", ng2_dir)
    operator = clients(config, "operator")
    producer = clients(config, "producer")
    wait_until(lambda: aggregator.poll() is not None or viewer.get(status_key("aggregator", "t0")) is not None,
               SYNC_S, "the aggregator's status on the primary")
    assert aggregator.poll() is None, processes.output(aggregator)
    nodegroup.set_once("nodegroups/ng-1", packed("session"))
    wait_until(lambda: viewer.get("nodegroups/ng-1") is not None, SYNC_S, "the registration on the primary")
    assert kv_status(viewer).extra["pair_state"] == "active" and kv_status(viewer).extra["unauthorised"] == 0

    # The primary stopped takes nothing more: what follows reaches the backup, which holds it as
    # pending with its writer's identity and judges it so when it becomes active.
    os.killpg(primary.process.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: stopped(primary.process.pid), SYNC_S, "every thread of the primary stopped")
        operator.set_once("acquire/request", packed("op"))
        viewer.set_once("acquire/viewer-tried", packed("viewer"))  # a viewer may not command
        other_job.set_once("nodegroups/ng-1", packed("taken"))  # held by the first job's key, mirrored
        for client in (viewer, nodegroup, other_job, operator, producer):
            wait_until(lambda c=client: c.server == address(backup) and c.synced(), 3 * SYNC_S,
                       "every client on the backup")
    finally:
        kill(primary)
    wait_until(lambda: viewer.get("acquire/request") == packed("op"), SYNC_S, "the operator's held write applied")
    status = wait_until(lambda: (s := kv_status(viewer)).extra.get("unauthorised") == 2 and s, SYNC_S,
                        "the two held writes refused on the backup")
    assert status.extra["pair"] == "backup" and status.extra["pair_state"] == "active"
    assert status.extra["failovers"] == 1 and status.extra["pending_applied"] >= 3
    assert viewer.get("acquire/viewer-tried") is None
    assert viewer.get("nodegroups/ng-1") == packed("session")

    # After the failover: each role writes its own keys on the backup, and nothing else.
    producer.set_once("status/producer/r0t0", packed("producer"))
    nodegroup.set_once("nodegroups/ng-1", packed("session again"))  # its holder may write it again
    other_job.set_once("nodegroups/ng-1", packed("taken again"))
    viewer.set_once("acquire/request", packed("viewer"))
    producer.set_once("nodegroups/fake", packed("producer"))
    operator.set_once("acquire/mark", packed("mark"))  # sent last by its own client: a mark to wait for
    wait_until(lambda: viewer.get("status/producer/r0t0") == packed("producer")
               and viewer.get("nodegroups/ng-1") == packed("session again") and viewer.get("acquire/mark") is not None
               and kv_status(viewer).extra.get("unauthorised") == 5, SYNC_S, "the writes after the failover judged")
    assert viewer.get("acquire/request") == packed("op") and viewer.get("nodegroups/fake") is None

    # The aggregator's agent moved too: its status is written again through the backup.
    wait_until(lambda: (raw := viewer.get(status_key("aggregator", "t0"))) is not None
               and ServiceStatus.decode(raw).extra.get(SERVER_FIELD) == address(backup), SYNC_S,
               "the aggregator's status written through the backup")
    assert aggregator.poll() is None, processes.output(aggregator)
    assert "refused" not in processes.output(aggregator).lower(), processes.output(aggregator)[-3000:]
    assert kv_status(viewer).extra["unauthenticated"] == 0


def test_the_peer_link_admits_only_the_kvstore_key_and_a_fake_peer_cannot_move_the_primary(
        secured_pair, keyring: Keyring, processes: Processes, clients) -> None:
    config, path = secured_pair()
    keyring.stranger("mallory", "kvstore")
    mallory = keyring.stranger_pair("mallory", "kvstore")
    kvstore_key = keyring.public("kvstore")
    # The primary alone, undecided: a peer that says "active" would make it passive (the pair's table).
    primary = KvServer(config, path, processes, pair="primary")
    primary.start()

    # A fake backup at the peer's address says "active" without the kvstore secret (no key, then a
    # stranger's): the primary's handshake with it fails, so it hears nothing of it.
    backup_port = int(config.kvstore.servers[1].rpartition(":")[2])
    backup_link = f"tcp://{LOOPBACK}:{backup_port + 3}"
    for curve in (None, mallory):
        with zmq.Context() as context, context.socket(zmq.PUB) as fake:
            fake.linger = 0
            if curve is not None:
                fake.curve_server = True
                fake.curve_secretkey = curve[1].encode()
            monitor = fake.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                                              | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                                              | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_DISCONNECTED)
            try:
                fake.bind(backup_link)
                events: list[int] = []

                def tried_twice() -> bool:
                    fake.send(b"active")
                    while monitor.poll(0):
                        events.append(recv_monitor_message(monitor)["event"])
                    return sum(1 for event in events if event != zmq.EVENT_HANDSHAKE_SUCCEEDED) >= 2

                kind = "no key" if curve is None else "a stranger's key"
                wait_until(tried_twice, SYNC_S, f"the primary to try the fake peer twice ({kind}; events {events})")
                assert zmq.EVENT_HANDSHAKE_SUCCEEDED not in events
            finally:
                fake.disable_monitor()
                monitor.close()
    clients(config, "producer")  # a writer's snapshot request is the vote (a viewer's is none): the primary is active
    viewer = clients(config, "viewer")
    status = kv_status(viewer)
    assert status.extra["pair_state"] == "active" and status.extra["peer_state"] in ("silent", "unheard")
    assert status.extra["failovers"] == 0 and status.extra["splits"] == 0
    assert "-> passive" not in primary.log()

    link = f"tcp://{LOOPBACK}:{primary.port + 3}"
    assert handshake(link, zmq.SUB, None) == REFUSED
    assert handshake(link, zmq.SUB, Curve(*mallory, kvstore_key)) == REFUSED
    # A client role's key, admitted on P .. P + 2, is no peer.
    assert handshake(link, zmq.SUB, Curve(*keyring.pair("viewer"), kvstore_key)) == REFUSED
    assert handshake(link, zmq.SUB, Curve(*keyring.pair("kvstore"), kvstore_key)) == SUCCEEDED
    # Nor can a stranger mirror: the snapshot port and the publisher admit the kvstore key (the
    # passive's mirror), not one that only claims the role.
    for offset, socket_type in ((0, zmq.DEALER), (1, zmq.SUB)):
        endpoint = f"tcp://{LOOPBACK}:{primary.port + offset}"
        assert handshake(endpoint, socket_type, Curve(*mallory, kvstore_key)) == REFUSED, f"stranger on P+{offset}"
        assert handshake(endpoint, socket_type, Curve(*keyring.pair("kvstore"), kvstore_key)) == SUCCEEDED
    # Five refused: the keyless peer seen by the link's monitor, the four keys by the ZAP handler.
    wait_until(lambda: kv_status(viewer).extra.get("unauthenticated", 0) >= 5, SYNC_S, "5 refusals in the status")
    wait_until(lambda: mallory[0] in primary.log(), SYNC_S, "the stranger's key in the log")
    wait_until(lambda: f"refused a peer on {link} " in primary.log(), SYNC_S, "the keyless peer in the log")
    assert mallory[1] not in primary.log()

    # A fake that greets in ZMTP 3.0 with the NULL mechanism and holds its connection open: the
    # primary finds the mismatch itself, a protocol error after which libzmq never reconnects that
    # socket. The real backup, started after it, is heard all the same: the primary connects a peer
    # link that heard nothing for 10 heartbeats anew.
    with socket.create_server((LOOPBACK, backup_port + 3)) as listener:
        listener.settimeout(SYNC_S)
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(SYNC_S)
            connection.sendall(NULL_GREETING)
            while connection.recv(4096):  # until the primary closes it
                pass
    backup = KvServer(config, path, processes, pair="backup")
    backup.start()
    wait_until(lambda: SNAPSHOT_TAKEN in backup.log(), SYNC_S, "the backup to mirror the primary")
    wait_until(lambda: kv_status(viewer).extra.get("peer_state") == "passive", SYNC_S, "the primary to hear its backup")


def test_a_viewers_snapshot_request_is_no_vote(secured_pair, processes: Processes, clients) -> None:
    # Once, with only the peer link cut, one snapshot request with a viewer key (every screen
    # holds one) made the backup active beside a live primary. A viewer writes nothing, so its
    # request to a server that does not serve counts for nothing; a writer's is the vote.
    config, path = secured_pair()
    primary, backup = start_pair(config, path, processes)
    viewer = clients(config, "viewer")
    os.killpg(primary.process.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: stopped(primary.process.pid), SYNC_S, "every thread of the primary stopped")
        # Primary, backup (refused), primary, backup: it asked the backup, whose peer is silent.
        wait_until(lambda: viewer.stats().server_moves >= 3, 3 * SYNC_S, "the viewer to try both servers")
        assert "-> active" not in backup.log(), backup.log()[-2000:]
        assert not viewer.synced()
        producer = clients(config, "producer")  # synced: its request was the vote
        assert producer.server == address(backup)
        wait_until(lambda: "pair: passive -> active" in backup.log(), SYNC_S, "the backup's log of the vote")
        wait_until(lambda: viewer.synced() and viewer.server == address(backup), 3 * SYNC_S,
                   "the viewer served by the new active")
    finally:
        kill(primary)
