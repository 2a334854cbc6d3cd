"""The kvstore pair's split (kvstore/SPEC.md, "The pair"; issue 33): the primary on ``agg``, the backup
on ``recv1``, a writing client on ``recv2`` that reaches both. The link between the two servers alone
is cut (a blackhole route each way, every other path left up) for many silence periods, then
restored: the backup, which hears no peer but no client asks, never becomes a second active (it
publishes no update on its P + 1, and the primary's sequence runs without a gap, as the client's
subscribers on both servers saw them), and the client loses no write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.netlab.stack import netlab_config
from harness.netlab.topology import Topology
from support import wait_until

from sectorflow.orchestration import ServiceSpec, Supervisor

PORT = 5556
SILENCE_HEARTBEATS = 3
DEADLINE_S = 60.0  # a failure guard on each wait

# Runs on recv2: a pair client writing w/<n> every 10 ms, at most 20,000 (the kvstore refuses a 25,001st
# key from one address, [kvstore] max_keys_per_address), and a SUB on each server's P + 1 counting
# its KVPUBs and HUGZ. Prints "synced" once it syncs, its counters as JSON lines every 100 ms, and a
# last line "final {...}" once the file argv[2] exists.
CLIENT = """
import json, os, struct, sys, time
import msgpack, zmq
from sectorflow.configs import load_config
from sectorflow.kvstore import Client, client_options
from sectorflow.waiting import WaitTimeout, wait_until
config = load_config(sys.argv[1])
client = Client(client_options(config))
assert client.wait_synced(30), "no sync"
print("synced", client.server, flush=True)
context = zmq.Context()
subs = {}
for role, server in zip(("primary", "backup"), config.kvstore.servers):
    host, _, port = server.rpartition(":")
    sub = context.socket(zmq.SUB)
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
        client.set_once(f"w/{issued:06d}", msgpack.packb(issued))
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
    wait_until(lambda: len(client.values("w/")) >= issued, 30, "every write in the replica")
except WaitTimeout:
    pass
print("final " + json.dumps({"updates": updates, "issued": issued, "present": len(client.values("w/")),
                             "server": client.server, "moves": client.stats().server_moves}), flush=True)
client.close()
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
