"""`sectorflow kvstore` and `sectorflow status` as a user runs them."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest
from support import Processes, wait_until
from kvstore_support import KvServer, clients, kvstore  # noqa: F401  (fixtures)

from sectorflow.kvstore import Client
from sectorflow.protocol import NodeGroupRecord, ServiceStatus, nodegroup_key, status_key

SYNC_S = 10.0
RUN_S = 60.0  # deadline of a one-shot command; a failure guard only


def sectorflow(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True,
                          timeout=RUN_S, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("command", ["kvstore", "status"])
def test_help_explains_the_command(command: str) -> None:
    result = sectorflow(command, "--help")
    assert result.returncode == 0
    assert "--config" in result.stdout
    assert ("ICANHAZ" in result.stdout or "Clone pattern" in result.stdout) if command == "kvstore" else (
        "--watch" in result.stdout and "--interval" in result.stdout)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_kvstore_stops_cleanly_on_signal(kvstore: KvServer, stop: signal.Signals) -> None:
    kvstore.process.send_signal(stop)
    assert kvstore.process.wait(RUN_S) == 0
    log = kvstore.log()
    assert f"received {stop.name}" in log and "stopping -> stopped" in log
    assert f"tcp://127.0.0.1:{kvstore.port}" in log and "Traceback" not in log


@pytest.mark.parametrize("taken", [0, 1, 2])
def test_kvstore_with_a_port_taken_exits_naming_the_address(make_config: Callable, taken: int) -> None:
    config, path = make_config()
    port = config.kvstore.port + taken
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        result = sectorflow("kvstore", "--config", str(path))
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("sectorflow kvstore: error:")]
    assert len(errors) == 1, result.stderr
    assert f"tcp://127.0.0.1:{port}" in errors[0] and "Address already in use" in errors[0]
    assert str(path) in errors[0] and "Traceback" not in result.stderr


def test_status_lists_registered_services_and_nodegroups(
    kvstore: KvServer, clients: Callable[..., Client]
) -> None:
    service = clients(kvstore.config)
    service.set(status_key("producer", "r0t1"),
                ServiceStatus(state="streaming", scan=7, messages=4242, extra={"expected": 5000}).encode(),
                kvstore.config.kvstore.ttl_s)
    service.set(nodegroup_key("ng-9"), NodeGroupRecord(uid="ng-9", host="10.0.0.9", ports=[6300, 6301],
                                                        node="nid9", rank=1, status="idle").encode())
    wait_until(lambda: service.get(nodegroup_key("ng-9")) and service.get(status_key("producer", "r0t1")), SYNC_S,
               "the registrations")

    result = sectorflow("status", "--config", str(kvstore.path))
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0] + "/" + line.split()[1]: line.split() for line in result.stdout.splitlines()
            if line.startswith(("producer", "ng-9", "kvstore "))}
    assert rows["producer/r0t1"][2:6] == ["streaming", "7", "4,242", "0"]
    assert "producer r0t1: expected 5000" in result.stdout.splitlines()  # its further fields, under the table
    assert rows["ng-9/10.0.0.9"] == ["ng-9", "10.0.0.9", "6300,6301", "nid9", "1", "idle"]
    assert rows["kvstore/server"][2] == "idle"


def test_status_without_a_server_says_so_and_fails(make_config: Callable) -> None:
    config, path = make_config()
    result = sectorflow("status", "--config", str(path), "--timeout", "0.5")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"sectorflow status: error: no kvstore server answered at tcp://127.0.0.1:{config.kvstore.port} within "
        f"0.5 s; start one with 'sectorflow kvstore --config {path}'"
    ]


def test_status_watch_refreshes_until_interrupted(kvstore: KvServer, processes: Processes) -> None:
    watch = processes.sectorflow("status", "--config", str(kvstore.path), "--watch", "--interval", "0.2",
                                 name="watch")
    wait_until(lambda: processes.output(watch).count("kvstore tcp://") >= 3, SYNC_S, "three refreshes")
    watch.send_signal(signal.SIGINT)
    assert watch.wait(RUN_S) == 0
    assert "Traceback" not in processes.output(watch)
