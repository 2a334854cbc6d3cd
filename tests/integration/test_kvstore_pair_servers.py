"""The kvstore pair's servers (kvstore/SPEC.md, "The pair"): two real `sectorflow kvstore --pair`
processes on loopback, one configuration listing both in `[kvstore] servers`. The backup mirrors the
primary; a SIGKILLed (or hung) primary fails over to the backup when a client asks it, with every
record written before; a restarted server mirrors the active; and while both live only one of them
ever publishes an update, whatever the clients ask."""

from __future__ import annotations

import os
import signal
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgpack
import pytest
import zmq
from guide_clone import SYNC_S as GUIDE_SYNC_S, GuideServerListClient, kvset_until_published
from harness import free_port_block
from kvstore_support import SYNC_S, KvServer, server_status
from support import LOOPBACK, Processes, sectorflow_command, stack_up, wait_until

from sectorflow.configs import Config
from sectorflow.kvstore import Client, client_options
from sectorflow.orchestration.supervisor import load_running

# Each server of a pair uses P .. P + 3 (P + 3: the peer link).
PAIR_PORTS = 4
SNAPSHOT_TAKEN = "mirror: snapshot of the active taken"


def address(server: KvServer) -> str:
    return f"{LOOPBACK}:{server.port}"


def silence_s(config: Config) -> float:
    return config.kvstore.heartbeat_ms * config.kvstore.silence_heartbeats / 1000.0


def kill(server: KvServer) -> None:
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()


def stopped(pid: int) -> bool:
    """Whether every thread of process ``pid`` is stopped (state T in /proc)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except OSError:
            continue  # a thread that ended meanwhile
    return bool(states) and all(state in ("T", "t") for state in states)


def start_pair(config: Config, path: Path, processes: Processes) -> tuple[KvServer, KvServer]:
    """The primary, then the backup once the primary serves; returns when the backup mirrors."""
    primary = KvServer(config, path, processes, pair="primary")
    primary.start()
    backup = KvServer(config, path, processes, pair="backup")
    backup.start()
    wait_until(lambda: SNAPSHOT_TAKEN in backup.log(), SYNC_S, "the backup to mirror the primary")
    return primary, backup


@pytest.fixture
def pair_config(make_config: Callable, tmp_path: Path) -> tuple[Config, Path]:
    first = free_port_block(LOOPBACK, 2 * PAIR_PORTS)
    return make_config(kvstore={"servers": [f"{LOOPBACK}:{first}", f"{LOOPBACK}:{first + PAIR_PORTS}"],
                                "log_dir": str(tmp_path / "kvlog")})


@pytest.fixture
def pair_clients() -> Iterator[Callable[[Config], Client]]:
    made: list[Client] = []

    def make(config: Config) -> Client:
        made.append(Client(client_options(config)))
        assert made[-1].wait_synced(SYNC_S)
        return made[-1]

    yield make
    for client in made:
        client.close()


@dataclass
class Writer:
    """A thread writing w/<i> (create once, no ttl) through a pair client, a few ms apart."""

    client: Client
    prefix: str = "w/"
    issued: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        def write() -> None:
            while not self.stop.wait(0.005):  # pacing, not synchronisation
                self.client.set_once(f"{self.prefix}{self.issued:06d}", msgpack.packb(self.issued))
                self.issued += 1

        self.thread = threading.Thread(target=write, name="pair-writer")
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join()

    def written(self) -> set[str]:
        return set(self.client.values(self.prefix))

    def every_key(self) -> set[str]:
        return {f"{self.prefix}{i:06d}" for i in range(self.issued)}


class Published:
    """Every KVPUB a server publishes on its P + 1, as (key, sequence), read on a thread."""

    def __init__(self, context: zmq.Context, server: KvServer) -> None:
        self.updates: list[tuple[str, int]] = []
        self.heartbeats = 0
        self._stop = threading.Event()
        self._socket = context.socket(zmq.SUB)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.SUBSCRIBE, b"")
        self._socket.connect(f"tcp://{LOOPBACK}:{server.port + 1}")
        self._thread = threading.Thread(target=self._read, name="published")
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            if not self._socket.poll(50):
                continue
            frames = self._socket.recv_multipart()
            key, sequence = frames[0].decode(), struct.unpack(">q", frames[1])[0]
            if key == "HUGZ":
                self.heartbeats += 1
            else:
                self.updates.append((key, sequence))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._socket.close()


def hand_over(client: Client, restarted: KvServer, active: KvServer, prefix: str) -> Writer:
    """``restarted`` started again mirrors ``active``; a writer under ``prefix`` writes through the
    kill of ``active`` until ``client`` is synced with ``restarted``; returns the finished writer."""
    restarted.start()
    wait_until(lambda: SNAPSHOT_TAKEN in restarted.log(), SYNC_S, f"the restarted {restarted.pair} to mirror")
    writer = Writer(client, prefix=prefix)
    writer.start()
    wait_until(lambda: len(writer.written()) >= 20, SYNC_S, f"20 writes on the {active.pair}")
    kill(active)
    wait_until(lambda: client.server == address(restarted) and client.synced(), 3 * SYNC_S,
               f"the client on the {restarted.pair}")
    writer.finish()
    return writer


def test_a_killed_primary_fails_over_to_the_backup_with_every_record_and_mirrors_again_when_restarted(
    pair_config: tuple[Config, Path], processes: Processes, pair_clients: Callable[[Config], Client],
    tmp_path: Path,
) -> None:
    config, path = pair_config
    primary, backup = start_pair(config, path, processes)
    writer = Writer(pair_clients(config))
    assert writer.client.server == address(primary)
    assert server_status(writer.client).extra["pair_state"] == "active"
    writer.start()
    wait_until(lambda: len(writer.written()) >= 50, SYNC_S, "50 writes on the primary")

    sequence_at_kill = writer.client.sequence()
    before_kill = writer.written()
    killed = time.monotonic()
    kill(primary)
    wait_until(lambda: writer.client.server == address(backup) and writer.client.synced(), 3 * SYNC_S,
               "the writer on the backup")
    moved_s = time.monotonic() - killed
    wait_until(lambda: len(writer.written() - before_kill) > 0, SYNC_S, "a write accepted by the backup")
    print(f"kill of the primary to the writer synced with the backup: {moved_s:.3f} s, to its first write accepted "
          f"there: {time.monotonic() - killed:.3f} s (silence period {silence_s(config):g} s)")
    assert moved_s <= 3 * silence_s(config), f"moved after {moved_s:.3f} s"
    writer.finish()

    # Every write is on the backup: those the primary published before it died (mirrored), those it
    # took but never published and those sent while it was dead (held as pending, applied).
    wait_until(lambda: writer.written() == writer.every_key(), SYNC_S, "every write on the backup")
    assert before_kill <= writer.written()
    assert writer.client.stats().unmirrored == 0
    assert writer.client.sequence() > sequence_at_kill  # the backup continued the primary's sequence
    status = server_status(writer.client)
    assert status.extra["pair"] == "backup" and status.extra["pair_state"] == "active"
    assert status.extra["failovers"] == 1 and status.extra["splits"] == 0
    assert status.extra["pending_lost"] == 0
    # One stack: the backup keeps the primary's id in its own log directory.
    log_dir = Path(config.kvstore.log_dir)
    assert (log_dir / "backup" / "stack_id").read_text() == (log_dir / "primary" / "stack_id").read_text()

    # The primary restarted mirrors the backup, which stays active; killed in turn, the backup hands
    # the pair back to the primary with everything.
    more = hand_over(writer.client, restarted=primary, active=backup, prefix="x/")
    wait_until(lambda: more.written() == more.every_key() and writer.written() == writer.every_key(), SYNC_S,
               "every write on the primary")

    # The backup restarted mirrors the primary again: killing the primary a second time loses nothing.
    last = hand_over(writer.client, restarted=backup, active=primary, prefix="y/")
    for one in (writer, more, last):
        wait_until(lambda w=one: w.written() == w.every_key(), SYNC_S, f"every {one.prefix} write on the backup")
    status = server_status(writer.client)  # the restarted backup's own count
    assert status.extra["pair"] == "backup" and status.extra["failovers"] == 1


def test_a_write_the_hung_primary_never_published_is_applied_from_pending(
    pair_config: tuple[Config, Path], processes: Processes, pair_clients: Callable[[Config], Client],
) -> None:
    config, path = pair_config
    primary, backup = start_pair(config, path, processes)
    client = pair_clients(config)
    client.set_once("before/1", msgpack.packb(1))
    # A key with a ttl: its holder had no chance to refresh it on the backup before the failover.
    client.set_once("lease/1", msgpack.packb(1), 60.0)
    wait_until(lambda: client.get("before/1") is not None and client.get("lease/1") is not None, SYNC_S,
               "writes on the primary")
    # Stopped, the primary takes the next write into its socket's buffer and publishes nothing: the
    # backup has it only as pending.
    os.killpg(primary.process.pid, signal.SIGSTOP)
    try:
        # kill() returns before every thread has stopped: a thread still running could take the write.
        wait_until(lambda: stopped(primary.process.pid), SYNC_S, "every thread of the primary stopped")
        client.set_once("held/1", msgpack.packb("held"))
        wait_until(lambda: client.server == address(backup) and client.synced(), 3 * SYNC_S, "the client on the backup")
        wait_until(lambda: client.get("held/1") == msgpack.packb("held"), SYNC_S, "the held write on the backup")
        assert client.get("before/1") is not None
        status = server_status(client)
        assert status.extra["pair_state"] == "active" and status.extra["pending_applied"] >= 1
    finally:
        kill(primary)
    wait_until(lambda: "applied 1 pending write(s) on becoming active" in backup.log(), SYNC_S,
               "the backup's log line of the pending write applied")
    # Becoming active, it counted every ttl afresh: the key's holder gets its whole ttl to find it.
    assert "gave 1 key(s) with a ttl their whole ttl from becoming active" in backup.log()



def test_a_partial_replica_leaves_a_server_that_turned_passive_under_it(
    pair_config: tuple[Config, Path], processes: Processes, pair_clients: Callable[[Config], Client],
) -> None:
    # Once, after two actives settled on the primary, a client replicating part of the store
    # (status/, as services and the dashboard do) stayed with the backup that yielded: its HUGZ
    # kept coming and a partial replica sees no sequence gap, so its view froze. A passive's HUGZ
    # say so, and count as no sign of a server to use.
    config, path = pair_config
    primary, backup = start_pair(config, path, processes)
    writer = pair_clients(config)
    partial = Client(client_options(config, subtree="status/"))
    try:
        assert partial.wait_synced(SYNC_S) and partial.server == address(primary)
        os.killpg(primary.process.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: stopped(primary.process.pid), SYNC_S, "every thread of the primary stopped")
            for client in (writer, partial):
                wait_until(lambda c=client: c.server == address(backup) and c.synced(), 3 * SYNC_S,
                           "the clients on the backup")
        finally:
            os.killpg(primary.process.pid, signal.SIGCONT)
        # Two actives: the pair settles on the primary, the backup yields and turns passive. The
        # primary's sequence runs ahead of what the backup reached alone, so the HUGZ the backup
        # publishes once it mirrors the primary are newer than the partial replica: nothing in their
        # sequence tells it to leave.
        one = replace(config.kvstore, servers=(), host=LOOPBACK, port=primary.port)
        with Client(client_options(replace(config, kvstore=one))) as direct:
            assert direct.wait_synced(3 * SYNC_S)
            for i in range(300):
                direct.set_once(f"bulk/{i:03d}", msgpack.packb(i))
            wait_until(lambda: direct.get("bulk/299") is not None, SYNC_S, "the writes on the primary")
        wait_until(lambda: "pair: active -> passive" in backup.log(), 3 * SYNC_S, "the backup to yield")
        wait_until(lambda: partial.server == address(primary) and partial.synced(), 3 * SYNC_S,
                   "the partial replica on the primary again")
        wait_until(lambda: writer.server == address(primary) and writer.synced(), 3 * SYNC_S,
                   "the full replica on the primary again")
        writer.set_once("status/after-the-split", msgpack.packb(1))
        wait_until(lambda: partial.get("status/after-the-split") is not None, SYNC_S,
                   "a write on the primary in the partial replica")
    finally:
        partial.close()

def test_while_both_servers_live_only_the_active_publishes_whatever_the_clients_ask(
    pair_config: tuple[Config, Path], processes: Processes, pair_clients: Callable[[Config], Client],
    make_config: Callable,
) -> None:
    config, path = pair_config
    primary, backup = start_pair(config, path, processes)
    context = zmq.Context()
    published = {server.pair: Published(context, server) for server in (primary, backup)}
    try:
        writers = [Writer(pair_clients(config), prefix=f"w{i}/") for i in range(2)]
        for writer in writers:
            writer.start()
        # A client of the backup alone asks it for snapshots all along: the primary lives, so the
        # backup serves none (the vote needs a silent active).
        backup_only, _ = make_config(kvstore={"port": backup.port, "servers": []})
        lone = Client(client_options(backup_only))
        try:
            wait_until(lambda: all(len(w.written()) >= 100 for w in writers) and published["backup"].heartbeats >= 10,
                       3 * SYNC_S, "100 writes each, 10 heartbeats of the backup")
            assert not lone.synced()
        finally:
            lone.close()
        for writer in writers:
            writer.finish()
        for writer in writers:
            wait_until(lambda w=writer: w.written() == w.every_key(), SYNC_S, f"every {writer.prefix} write")
    finally:
        for one in published.values():
            one.close()
        context.term()
    assert published["backup"].updates == []  # the passive never published an update
    sequences = [sequence for _, sequence in published["primary"].updates]
    assert sequences == list(range(sequences[0], sequences[0] + len(sequences)))  # one writer of the sequence
    processes.stop(backup.process)
    assert "pair: ended passive (peer active)" in backup.log()
    refused = [line for line in backup.log().splitlines() if "snapshot request(s) refused" in line]
    assert refused and " 0 snapshot request(s) refused" not in refused[0]


def pair_line(path: Path) -> str:
    """The line of `sectorflow status` that says which server of the pair is active, or ""."""
    result = sectorflow_command("status", "--config", str(path), timeout_s=60)
    return next((line for line in result.stdout.splitlines() if line.startswith("kvstore pair: ")), "")


def test_up_starts_the_pair_and_a_scan_goes_on_disk_after_the_primary_is_killed(
    pair_config: tuple[Config, Path], tmp_path: Path,
) -> None:
    config, path = pair_config
    primary, backup = config.kvstore.servers
    run_dir = tmp_path / "run"
    with stack_up(config, path, run_dir, tmp_path / "h5", 60.0, nodegroups=False) as client:
        running = {service.name: service for service in load_running(run_dir)}
        assert {"kvstore-primary", "kvstore-backup"} <= set(running) and "kvstore" not in running
        wait_until(lambda: pair_line(path) == f"kvstore pair: the primary is active (this server); its peer at "
                   f"{backup} is passive; failovers 0, splits 0", SYNC_S, "status to show the primary active")
        os.kill(running["kvstore-primary"].pid, signal.SIGKILL)
        wait_until(lambda: client.server == backup and client.synced(), 3 * SYNC_S, "the client on the backup")
        wait_until(lambda: pair_line(path) == f"kvstore pair: the backup is active (this server); its peer at "
                   f"{primary} is silent; failovers 1, splits 0", SYNC_S, "status to show the backup active")
        on_disk = sectorflow_command("acquire", "--config", str(path), "--scan-shape", "4x4", "--wait", "--timeout",
                                     "120")
        assert on_disk.returncode == 0, on_disk.stdout + on_disk.stderr
        assert "on disk" in on_disk.stdout, on_disk.stdout


@pytest.mark.parametrize(("servers", "pair", "expected"), [
    ([], "primary", "--pair primary needs [kvstore] servers to list the pair, primary first"),
    (["127.0.0.1:6000", "127.0.0.1:6010"], "", "[kvstore] servers lists a pair (127.0.0.1:6000, 127.0.0.1:6010): "
     "run each server with --pair primary or --pair backup"),
    (["127.0.0.1:65533", "127.0.0.1:6010"], "primary", "out of range for a pair"),
])
def test_a_pair_misconfigured_is_refused_in_one_line(
    make_config: Callable, servers: list[str], pair: str, expected: str,
) -> None:
    _, path = make_config(kvstore={"servers": servers})
    result = sectorflow_command("kvstore", "--config", str(path), *(("--pair", pair) if pair else ()), timeout_s=60)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("sectorflow kvstore: error:")]
    assert len(errors) == 1 and expected in errors[0], result.stderr
    assert "Traceback" not in result.stderr


def test_the_guides_server_list_client_moves_to_the_backup_with_every_record_when_the_primary_is_killed(
    pair_config: tuple[Config, Path], processes: Processes,
) -> None:
    """The Guide's model-six client, written from its description (tests/integration/guide_clone.py),
    not ours: it asks the backup for a snapshot once the primary is silent, which is the vote."""
    config, path = pair_config
    primary, backup = start_pair(config, path, processes)
    guide = GuideServerListClient(zmq.Context.instance(), [primary.port, backup.port], silence_s(config))
    try:
        guide.sync()
        assert guide.current == 0 and guide.moves == 0
        before = msgpack.packb("written before the kill")
        _, sequence_before, _ = kvset_until_published(guide, b"guide/before", before)

        kill(primary)
        wait_until(guide.follow, 3 * GUIDE_SYNC_S, "the Guide's client to leave the silent primary")
        assert guide.ports[guide.current] == backup.port and guide.moves == 1
        assert guide.kvmap[b"guide/before"] == before  # the backup's snapshot holds it
        assert guide.sequence >= sequence_before

        after = msgpack.packb("written after the failover")
        _, sequence_after, _ = kvset_until_published(guide, b"guide/after", after)
        assert sequence_after > sequence_before  # the backup went on from the primary's sequence
    finally:
        guide.close()
