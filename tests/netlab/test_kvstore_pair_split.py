"""The kvstore pair's split (kvstore/SPEC.md, "The pair"): the primary on ``agg``, the backup
on ``recv1``, a writing client on ``recv2`` that reaches both. The link between the two servers alone
is cut (a blackhole route each way, every other path left up) for many silence periods, then
restored: the backup, which hears no peer but no client asks, never becomes a second active (it
publishes no update on its P + 1, and the primary's sequence runs without a gap, as the client's
subscribers on both servers saw them), and the client loses no write.

With ``[security]`` on, on a whole facility stack: only the pair's peer link
(P + 3) is cut, by the harness, while a viewer's key asks the backup for snapshots (a viewer may write
nothing, so its request is no vote) and an operator's client writes through the primary; then the
next scan, after the link heals, is whole."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from beamline import facility_sections
from harness.netlab.stack import NetlabStack, netlab_config
from harness.netlab.topology import Topology
from keyring import Keyring
from netlab_beamline import accounted, finish
from support import Processes, wait_until
from test_facility_failover_hosts import lease_line

from sectorflow.orchestration import ServiceSpec, Supervisor
from sectorflow.orchestration.stack import AGGREGATOR_STANDBY

PORT = 5556
SILENCE_HEARTBEATS = 3
DEADLINE_S = 60.0  # a failure guard on each wait

# Runs on recv2: a pair client of role argv[3] (default viewer, which a plain stack lets write)
# writing <argv[4]><n> (default w/) every 10 ms, at most 20,000 (the kvstore refuses a 25,001st key
# from one address, [kvstore] max_keys_per_address), and a SUB on each server's P + 1 (with
# [security] on, with the viewer key) counting its KVPUBs and HUGZ. Prints "synced" once it syncs,
# its counters as JSON lines every 100 ms, and a last line "final {...}" once the file argv[2] exists.
CLIENT = """
import json, os, struct, sys, time
import msgpack, zmq
from sectorflow.configs import load_config
from sectorflow.kvstore import Client, client_options
from sectorflow.security.options import kvstore_client_curve
from sectorflow.waiting import WaitTimeout, wait_until
config = load_config(sys.argv[1])
writer, prefix = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else ("viewer", "w/")
client = Client(client_options(config, role=writer))
assert client.wait_synced(30), "no sync"
print("synced", client.server, flush=True)
context = zmq.Context()
reader = kvstore_client_curve(config, "viewer")
subs = {}
for role, server in zip(("primary", "backup"), config.kvstore.servers):
    host, _, port = server.rpartition(":")
    sub = context.socket(zmq.SUB)
    if reader.enabled:
        sub.curve_publickey, sub.curve_secretkey = reader.public_key.encode(), reader.secret_key.encode()
        sub.curve_serverkey = reader.server_key.encode()
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"tcp://{host}:{int(port) + 1}")
    subs[role] = sub
poller = zmq.Poller()
for sub in subs.values():
    poller.register(sub, zmq.POLLIN)
updates = {"primary": [], "backup": []}
heartbeats = {"primary": 0, "backup": 0}
MAX_WRITES = 20_000
issued, last_report, next_write = 0, 0.0, time.monotonic()
while not os.path.exists(sys.argv[2]):
    if issued < MAX_WRITES and time.monotonic() >= next_write:
        client.set_once(f"{prefix}{issued:06d}", msgpack.packb(issued))
        issued += 1
        next_write += 0.01
    # Until the next write is due: the updates the writes bring back must not pace them.
    wait_ms = max(0, int((next_write - time.monotonic()) * 1000)) if issued < MAX_WRITES else 10
    for sub, _ in poller.poll(wait_ms):
        role = next(r for r, s in subs.items() if s is sub)
        while True:
            try:
                frames = sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if frames[0] == b"HUGZ":
                heartbeats[role] += 1
            else:
                updates[role].append(struct.unpack(">q", frames[1])[0])
    if time.monotonic() - last_report > 0.1:
        last_report = time.monotonic()
        print(json.dumps({"heartbeats": heartbeats, "issued": issued}), flush=True)
try:  # every write back in the replica, or the final line says how many are not
    wait_until(lambda: len(client.values(prefix)) >= issued, 30, "every write in the replica")
except WaitTimeout:
    pass
print("final " + json.dumps({"updates": updates, "issued": issued, "present": len(client.values(prefix)),
                             "server": client.server, "moves": client.stats().server_moves}), flush=True)
client.close()
"""


# Runs on recv2: a DEALER with the viewer's key at the backup's P (argv[1]'s second server) that, once
# its CURVE handshake succeeded, sends a snapshot request (ICANHAZ?, every subtree) every 0.5 s and
# counts the replies, until the file argv[2] exists. Prints "asked <n>" after each request and a last
# line "final <asked> <replies>".
VIEWER = """
import os, sys, zmq
from zmq.utils.monitor import recv_monitor_message
from sectorflow.configs import load_config
from sectorflow.security.options import kvstore_client_curve
config = load_config(sys.argv[1])
host, _, port = config.kvstore.servers[1].rpartition(":")
curve = kvstore_client_curve(config, "viewer")
context = zmq.Context()
dealer = context.socket(zmq.DEALER)
dealer.linger = 0
dealer.curve_publickey, dealer.curve_secretkey = curve.public_key.encode(), curve.secret_key.encode()
dealer.curve_serverkey = curve.server_key.encode()
monitor = dealer.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
dealer.connect(f"tcp://{host}:{port}")
while recv_monitor_message(monitor)["event"] != zmq.EVENT_HANDSHAKE_SUCCEEDED:
    pass
asked = replies = 0
while not os.path.exists(sys.argv[2]):
    dealer.send_multipart([b"ICANHAZ?", b""])
    asked += 1
    print("asked", asked, flush=True)
    while dealer.poll(500):
        dealer.recv_multipart()
        replies += 1
print("final", asked, replies, flush=True)
"""


def counters(log: str) -> dict:
    lines = [line for line in log.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"heartbeats": {"primary": 0, "backup": 0}, "issued": 0}


def cut(net: Topology, blackhole: bool) -> None:
    """The route between the two servers' hosts, each way: a blackhole, or deleted again."""
    verb = "add" if blackhole else "del"
    for role, peer in (("agg", "recv1"), ("recv1", "agg")):
        subprocess.run(["ip", "-n", net.hosts[role].namespace, "route", verb, "blackhole",
                        f"{net.address(peer)}/32"], check=True, capture_output=True, text=True)


def test_a_cut_between_the_pair_makes_no_second_active_while_clients_reach_the_first(tmp_path: Path) -> None:
    with Topology() as net:
        primary, backup = f"{net.address('agg')}:{PORT}", f"{net.address('recv1')}:{PORT}"
        config, path = netlab_config(tmp_path, kvstore={
            "servers": [primary, backup], "bind_host": "0.0.0.0", "heartbeat_ms": 200,
            "silence_heartbeats": SILENCE_HEARTBEATS, "log_dir": str(tmp_path / "kvlog")})
        script = tmp_path / "pair_client.py"
        script.write_text(CLIENT)
        stop_file = tmp_path / "stop"
        with Supervisor(tmp_path / "run") as supervisor:
            def start(role: str, name: str, argv: list[str]) -> None:
                supervisor.start(ServiceSpec(name, tuple(net.command(role, argv))))

            def log(name: str) -> str:
                return supervisor.log_path(name).read_text(errors="replace")

            kvstore = [sys.executable, "-m", "sectorflow", "kvstore", "--config", str(path), "--pair"]
            start("agg", "kvstore-primary", [*kvstore, "primary"])
            start("recv1", "kvstore-backup", [*kvstore, "backup"])
            wait_until(lambda: "mirror: snapshot of the active taken" in log("kvstore-backup"), DEADLINE_S,
                       "the backup to mirror the primary")
            start("recv2", "client", [sys.executable, str(script), str(path), str(stop_file)])
            wait_until(lambda: f"synced {primary}" in log("client"), DEADLINE_S, "the client synced with the primary")

            cut(net, blackhole=True)
            wait_until(lambda: "pair: the peer is silent" in log("kvstore-primary")
                       and "pair: the peer is silent" in log("kvstore-backup"), DEADLINE_S,
                       "both servers to find the peer link silent")
            # Many silence periods of the cut, counted in the backup's heartbeats the client hears.
            start_beats = counters(log("client"))["heartbeats"]["backup"]
            wait_until(lambda: counters(log("client"))["heartbeats"]["backup"] >= start_beats + 5 * SILENCE_HEARTBEATS,
                       DEADLINE_S, "five silence periods of the cut")
            cut(net, blackhole=False)
            wait_until(lambda: "pair: the peer is heard again" in log("kvstore-primary")
                       and "pair: the peer is heard again" in log("kvstore-backup"), DEADLINE_S,
                       "both servers to hear the peer again")
            stop_file.write_text("")
            wait_until(lambda: "final " in log("client"), DEADLINE_S, "the client's last counts")
            final = json.loads(log("client").split("final ", 1)[1].splitlines()[0])
            assert "-> active" not in log("kvstore-backup")
            assert "-> passive" not in log("kvstore-primary")
        assert final["updates"]["backup"] == []  # the passive never published an update
        sequences = final["updates"]["primary"]
        assert sequences and sequences == list(range(sequences[0], sequences[0] + len(sequences)))
        assert final["server"] == primary and final["moves"] == 0
        assert final["present"] == final["issued"]


BACKUP_HOST = "recv4"
SHAPE, SECTORS, RATE_HZ = "16x16", 16 * 16 * 4, 25.0
ENDED = re.compile(r"pair: ended (\w+) \(peer [^)]*\); (\d+) failover\(s\), (\d+) split\(s\), \d+ update\(s\) "
                   r"mirrored, (\d+) snapshot request\(s\) refused")


@pytest.mark.mpi
def test_with_security_a_cut_peer_link_and_a_viewers_requests_make_no_second_active_and_the_next_scan_is_whole(
        processes: Processes, tmp_path: Path) -> None:
    sections = facility_sections("agg.netlab", PORT, Keyring(tmp_path / "keys").beamline, tmp_path / "kvlog")
    sections["kvstore"].update(servers=[f"agg.netlab:{PORT}", f"{BACKUP_HOST}.netlab:{PORT}"], bind_host="0.0.0.0")
    # The shortest lease a kvstore failover cannot interrupt on netlab's 500 ms heartbeat.
    sections["aggregator"].update(standby_host=f"{BACKUP_HOST}.netlab", bind_host="0.0.0.0", takeover_s=4.0)
    sections["receivers"] = [{**receiver, "host": f"recv{r + 1}.netlab"}
                             for r, receiver in enumerate(sections["receivers"])]
    config, path = netlab_config(tmp_path, nodegroup={"scan_timeout_s": 20.0}, **sections)
    silence = config.kvstore.silence_heartbeats
    writer, viewer = tmp_path / "writer.py", tmp_path / "viewer.py"
    writer.write_text(CLIENT)
    viewer.write_text(VIEWER)
    stop_file = tmp_path / "stop"
    supervisor = processes.supervisor
    with Topology() as net:
        stack = NetlabStack(net, config, path, supervisor)

        def log(name: str) -> str:
            return supervisor.log_path(name).read_text(errors="replace")

        try:
            stack.start(hosts={"kvstore-backup": BACKUP_HOST})
            stack.start_service(BACKUP_HOST, AGGREGATOR_STANDBY, "aggregator", "--standby")
            stack.start_nodegroups()
            wait_until(lambda: f"standby: {BACKUP_HOST}" in stack.status(), DEADLINE_S, "the standby's registration")
            wait_until(lambda: "mirror: snapshot of the active taken" in log("kvstore-backup"), DEADLINE_S,
                       "the backup to mirror the primary")
            lease = lease_line(stack)
            assert lease[0].split(".")[0] == "agg" and lease[3] == "0", lease
            primary = config.kvstore.servers[0]
            supervisor.start(ServiceSpec("writer", tuple(net.command("recv2", [
                sys.executable, str(writer), str(path), str(stop_file), "operator", "acquire/split-test/"]))))
            wait_until(lambda: f"synced {primary}" in log("writer"), DEADLINE_S, "the operator's client on the primary")

            net.cut_port("agg", BACKUP_HOST, PORT + 3)
            wait_until(lambda: "pair: the peer is silent" in log("kvstore-primary")
                       and "pair: the peer is silent" in log("kvstore-backup"), DEADLINE_S,
                       "both servers to find the peer link silent")
            supervisor.start(ServiceSpec("viewer", tuple(net.command("recv2", [
                sys.executable, str(viewer), str(path), str(stop_file)]))))
            wait_until(lambda: "asked 1\n" in log("viewer"), DEADLINE_S, "the viewer's first request to the backup")
            # Many silence periods of the cut after it, counted in the backup's heartbeats the writer hears.
            start_beats = counters(log("writer"))["heartbeats"]["backup"]
            wait_until(lambda: counters(log("writer"))["heartbeats"]["backup"] >= start_beats + 5 * silence,
                       DEADLINE_S, "five silence periods of the cut")
            net.heal_port("agg", BACKUP_HOST, PORT + 3)
            wait_until(lambda: "pair: the peer is heard again" in log("kvstore-primary")
                       and "pair: the peer is heard again" in log("kvstore-backup"), DEADLINE_S,
                       "both servers to hear the peer again")
            stop_file.write_text("")
            wait_until(lambda: "final " in log("writer") and "final " in log("viewer"), DEADLINE_S,
                       "the clients' last counts")
            final = json.loads(log("writer").split("final ", 1)[1].splitlines()[0])
            asked, replies = (int(n) for n in log("viewer").split("final ", 1)[1].split()[:2])
            assert "-> active" not in log("kvstore-backup") and "-> passive" not in log("kvstore-primary")

            acquire = stack.acquire(1, SHAPE, RATE_HZ)
            outcome = accounted(stack, finish(stack, acquire), 1, SECTORS,
                                "kvstore pair's peer link cut, a viewer asking the backup, [security] on (netlab)")
            assert (outcome.outcome, outcome.exit_code, outcome.counted) == ("complete", 0, SECTORS), outcome.output
            assert lease_line(stack) == lease  # the active aggregator held the lease throughout
        finally:
            stack.stop()
        # One active at every moment, by the sequence numbers the writer's subscribers saw: the
        # passive never published an update, the primary's ran without a gap or a repeat.
        assert final["updates"]["backup"] == []
        sequences = final["updates"]["primary"]
        assert sequences and sequences == list(range(sequences[0], sequences[0] + len(sequences)))
        assert final["server"] == primary and final["moves"] == 0
        assert final["issued"] > 0 and final["present"] == final["issued"]
        # The viewer asked through the cut and was never served; each request refused, none a vote.
        assert asked >= 2 and replies == 0, (asked, replies)
        backup_end = ENDED.search(log("kvstore-backup"))
        primary_end = ENDED.search(log("kvstore-primary"))
        assert backup_end and primary_end, stack.logs()
        assert backup_end.group(1, 2, 3) == ("passive", "0", "0") and int(backup_end.group(4)) >= asked, backup_end[0]
        assert primary_end.group(1, 2, 3) == ("active", "0", "0"), primary_end[0]
