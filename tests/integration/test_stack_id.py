"""A stack's identity (kvstore/SPEC.md, "The stack's identity"): a real `sectorflow kvstore` process
restarted with its log keeps its stack id and its clients say nothing; restarted without one it is a
new stack, and every client (in this process, and real producer and aggregator daemons) warns once,
naming both ids, and says so in its statuses; `sectorflow status` shows the id and flags them."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kvstore_support import SYNC_S, KvServer, RawPeer, server_status, start_kvstore
from producer_support import SMALL_DETECTOR, START_S, small_receivers
from support import Processes, sectorflow_command, wait_until

from sectorflow.configs import Config
from sectorflow.kvstore import STACK_CHANGED_FIELD, STACK_ID_FIELD, Client, client_options, is_stack_id
from sectorflow.protocol import ServiceStatus, status_key

OWN_STATUS = status_key("producer", "stack-test")
SUBTREE_STATUS = status_key("aggregator", "stack-test")


class Watched:
    """A client whose warnings are collected (and closed by the test's ``watched`` fixture)."""

    def __init__(self, server: KvServer, subtree: str = "") -> None:
        self.warnings: list[str] = []
        self.client = Client(client_options(server.config, subtree, warn=self.warnings.append))


@pytest.fixture
def watched() -> Iterator[Callable[..., Watched]]:
    made: list[Watched] = []

    def make(server: KvServer, subtree: str = "") -> Watched:
        made.append(Watched(server, subtree))
        return made[-1]

    yield make
    for one in made:
        one.client.close()


def restart(server: KvServer, sig: signal.Signals = signal.SIGKILL) -> None:
    os.killpg(server.process.pid, sig)
    server.process.wait()
    server.start()


def stack_fields(config: Config, key: str) -> dict[str, object]:
    """The stack fields of ``key``'s status as a new client of the server reads them."""
    with Client(client_options(config)) as reader:
        assert reader.wait_synced(SYNC_S)
        raw = reader.get(key)
        if raw is None:
            return {}
        extra = ServiceStatus.decode(raw).extra
        return {name: extra[name] for name in (STACK_ID_FIELD, STACK_CHANGED_FIELD) if name in extra}


def test_a_kvstore_restarted_with_its_log_keeps_its_stack_id_and_its_clients_say_nothing(
    make_config: Callable, processes: Processes, watched: Callable[..., Watched], tmp_path: Path
) -> None:
    log_dir = tmp_path / "kvlog"
    server = start_kvstore(make_config, processes, kvstore={"log_dir": str(log_dir)})
    one = watched(server)
    assert one.client.wait_synced(SYNC_S)
    stack = one.client.stack_id
    assert is_stack_id(stack) and one.client.first_stack_id == stack
    assert (log_dir / "stack_id").read_text() == f"{stack}\n"
    assert server_status(one.client).extra[STACK_ID_FIELD] == stack
    assert f"stack {stack}, kept in {log_dir}/stack_id" in server.log()
    one.client.set(OWN_STATUS, ServiceStatus(state="idle").encode(), server.config.kvstore.ttl_s)
    wait_until(lambda: stack_fields(server.config, OWN_STATUS) == {STACK_ID_FIELD: stack}, SYNC_S,
               "the client's status to say its stack")

    snapshots = one.client.stats().snapshots
    restart(server)
    wait_until(lambda: one.client.stats().snapshots > snapshots and one.client.synced(), SYNC_S,
               "the client to sync with the restarted server")
    assert one.client.stack_id == stack and one.client.first_stack_id == stack
    assert server_status(one.client).extra[STACK_ID_FIELD] == stack
    assert stack_fields(server.config, OWN_STATUS) == {STACK_ID_FIELD: stack}
    assert one.warnings == []


def test_a_kvstore_restarted_without_a_log_is_a_new_stack_and_each_client_warns_once_and_says_so(
    make_config: Callable, processes: Processes, watched: Callable[..., Watched]
) -> None:
    server = start_kvstore(make_config, processes)
    full, scans_only = watched(server), watched(server, "scans/")
    assert full.client.wait_synced(SYNC_S) and scans_only.client.wait_synced(SYNC_S)
    old = full.client.stack_id
    assert is_stack_id(old) and scans_only.client.stack_id == old, "a subtree client learns the stack too"
    ttl_s = server.config.kvstore.ttl_s
    full.client.set(OWN_STATUS, ServiceStatus(state="idle").encode(), ttl_s)
    scans_only.client.set(SUBTREE_STATUS, ServiceStatus(state="idle").encode(), ttl_s)
    assert f"stack {old}, new: no durable records" in server.log()

    restart(server, signal.SIGTERM)  # a clean stop: the map goes with the process all the same
    wait_until(lambda: full.client.stack_id not in ("", old) and scans_only.client.stack_id not in ("", old),
               SYNC_S, "both clients to sync with the new stack")
    new = full.client.stack_id
    assert scans_only.client.stack_id == new and full.client.first_stack_id == old
    for key in (OWN_STATUS, SUBTREE_STATUS):
        wait_until(lambda key=key: stack_fields(server.config, key) == {STACK_ID_FIELD: new, STACK_CHANGED_FIELD: old},
                   SYNC_S, f"{key} to say the stack changed")
    for one in (full, scans_only):
        assert len(one.warnings) == 1, one.warnings
        assert f"is stack {new}, not stack {old} of the last sync" in one.warnings[0]
        assert "it restarted without its log (a new, empty stack)" in one.warnings[0]
        assert "re-registering" in one.warnings[0]

    shown = sectorflow_command("status", "--config", str(server.path))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"kvstore tcp://{server.config.kvstore.host}:{server.port}: stack {new}, sequence ")
    assert f"producer stack-test: STACK CHANGED: joined stack {old}, now in stack {new}" in shown.stdout
    assert f"stack_id {new}" not in shown.stdout, "the id is the header's, not every service's detail"


def test_running_daemons_warn_once_and_their_statuses_show_the_new_stack(
    make_config: Callable, processes: Processes
) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(2))
    path = str(server.path)
    producer = processes.sectorflow("producer", "--config", path, "--receiver", "0", name="producer0")
    aggregator = processes.sectorflow("aggregator", "--config", path, name="aggregator")
    names = [("producer", "r0t0"), ("producer", "r0t1")] + [("aggregator", f"t{r}") for r in range(4)]

    def stacks() -> dict[tuple[str, str], dict[str, object]]:
        return {name: stack_fields(server.config, status_key(*name)) for name in names}

    with Client(client_options(server.config)) as client:
        assert client.wait_synced(SYNC_S)
        old = client.stack_id
    wait_until(lambda: set(map(str, stacks().values())) == {str({STACK_ID_FIELD: old})}, START_S,
               "every producer thread and relay thread to publish its status in the stack")

    restart(server)
    with Client(client_options(server.config)) as client:
        assert client.wait_synced(SYNC_S)
        new = client.stack_id
    assert is_stack_id(new) and new != old
    expected = {STACK_ID_FIELD: new, STACK_CHANGED_FIELD: old}
    wait_until(lambda: all(fields == expected for fields in stacks().values()), START_S,
               "every status to say the stack changed")
    for daemon in (producer, aggregator):
        log = processes.output(daemon)
        warnings = [line for line in log.splitlines() if " WARNING " in line and f"is stack {new}" in line]
        assert len(warnings) == 1, log
        assert f"not stack {old} of the last sync" in warnings[0] and "re-registering" in warnings[0]
        assert daemon.poll() is None, log

    shown = sectorflow_command("status", "--config", path)
    assert shown.returncode == 0, shown.stderr
    assert f": stack {new}, sequence " in shown.stdout.splitlines()[0]
    flagged = [line for line in shown.stdout.splitlines() if "STACK CHANGED" in line]
    assert len(flagged) == len(names), shown.stdout


def test_a_stack_id_file_that_holds_no_id_stops_the_server_with_one_line(make_config: Callable, tmp_path: Path) -> None:
    log_dir = tmp_path / "kvlog"
    log_dir.mkdir()
    (log_dir / "stack_id").write_text("not an id\n")
    _, path = make_config(kvstore={"log_dir": str(log_dir)})
    result = sectorflow_command("kvstore", "--config", str(path), timeout_s=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{log_dir}/stack_id holds no stack id (16 hex digits) on its first line; remove the file" in lines[0]


def test_a_peer_cannot_name_the_stack_with_a_status_of_its_own(
    make_config: Callable, processes: Processes, watched: Callable[..., Watched]
) -> None:
    server = start_kvstore(make_config, processes)
    observer = watched(server)
    assert observer.client.wait_synced(SYNC_S)
    stack = observer.client.stack_id
    fake = ServiceStatus(state="idle", extra={STACK_ID_FIELD: "f" * 16}).encode()
    peer = RawPeer(server.port)
    try:
        # Without security a peer may write beside the server's status (not over it: refused as malformed).
        peer.kvset_until(b"status/kvstore/zzz", fake, lambda: observer.client.get("status/kvstore/zzz") == fake,
                         "the peer's status beside the server's")
        peer.kvset_until(b"status/kvstore/server", fake,
                         lambda: (server_status(observer.client).extra.get("malformed") or 0) > 0,
                         "the server to refuse its own status key")
    finally:
        peer.close()
    fresh = watched(server)
    assert fresh.client.wait_synced(SYNC_S)
    assert fresh.client.stack_id == stack == server_status(fresh.client).extra[STACK_ID_FIELD]
    assert observer.warnings == [] and fresh.warnings == []
