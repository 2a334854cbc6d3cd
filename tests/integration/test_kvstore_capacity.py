"""A flood of keys into the kvstore of a running stack (kvstore, aggregator, two
NodeGroup ranks under mpiexec, four producer daemons), first from one client on the stack's own
address, then from four more addresses until the map is full, and scans afterwards in a tiny room
for the stack's records: every scan is accounted whole (`acquire --wait` exits 0), each finished
scan is folded into its summary, whose account `acquire` and `status` read as the parts', the
oldest summaries go first past `scans_kept`, and the flood never takes the room of the stack's
records (kvstore/SPEC.md, "Bounds", "Folding"); then the same with [security] on, where only an
admitted writer's keys reach the map."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest
from keyring import Keyring
from kvstore_support import RawPeer, server_status
from support import sectorflow_command, stack_up, wait_until

from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration import load_running
from sectorflow.operations.scan_account import COMPLETE, account, records_of
from sectorflow.protocol import ScanFileRecord, scan_prefix, scan_request_key
from sectorflow.protocol.scan_summary import decode_parts, summary_key

pytestmark = pytest.mark.mpi

SMALL = {"frame_rows": 32, "frame_cols": 32, "sector_rows": 8, "sector_cols": 32, "dtype": "uint16"}
START_S = 60.0
FLOOD_S = 60.0  # deadline of a flood; a failure guard, not a speed requirement
BATCH = 100  # keys sent between two looks at the server's counters
VALUE = msgpack.packb(b"x" * 2000)  # 2 kB values, as in the flood once seen
# The room of the stack's records holds two running 16 x 16 scans (12 keys each) beside the
# registrations and statuses (about 13 keys); a finished scan folds into one key, and two summaries
# are kept: the third folded scan erases the first.
KVSTORE = {"max_keys": 3000, "max_keys_per_address": 1000, "max_stack_keys": 40, "scans_kept": 2}


@dataclass
class Stack:
    config: Config
    path: Path
    run_dir: Path
    client: Client

    def counters(self) -> dict:
        status = server_status(self.client)
        return {} if status is None else status.extra


@pytest.fixture
def stack(make_config: Callable, tmp_path: Path) -> Iterator[Stack]:
    config, path = make_config(detector=SMALL, kvstore=KVSTORE)
    run_dir = tmp_path / "run"
    with stack_up(config, path, run_dir, tmp_path / "h5", START_S) as client:
        yield Stack(config, path, run_dir, client)


def flood(stack: Stack, source: str) -> int:
    """Keys of 2 kB from ``source`` until the server refuses one more (its quota or a full map)."""
    peer = RawPeer(stack.config.kvstore.port, source=source)
    sent = 0
    before = stack.counters()
    refusals = before.get("refused_quota", 0) + before.get("refused_full", 0)

    def refused() -> bool:
        nonlocal sent
        now = stack.counters()
        if now.get("refused_quota", 0) + now.get("refused_full", 0) > refusals:
            return True
        for _ in range(BATCH):  # a PUB drops what its high-water mark does not take: the flood goes on
            peer.kvset(f"flood/{source}/{sent}".encode(), VALUE)
            sent += 1
        return False

    try:
        wait_until(refused, FLOOD_S, f"a refusal of the flood from {source}")
    finally:
        peer.close()
    return sent


def acquire(stack: Stack, scan: int) -> subprocess.CompletedProcess:
    return sectorflow_command("acquire", "--config", str(stack.path), "--scan-number", str(scan), "--scan-shape",
                              "16x16", "--rate", "0", "--wait", "--timeout", "120", timeout_s=180)


def kvstore_rss_kib(run_dir: Path) -> int:
    pid = next(s.pid for s in load_running(run_dir) if s.name == "kvstore")
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def test_a_flooded_kvstore_still_accounts_every_scan_whole_and_the_oldest_scans_go_first(stack: Stack) -> None:
    flood(stack, "127.0.0.1")  # one client, on the stack's own address: its quota
    for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):  # the map fills
        flood(stack, source)
    flooded = stack.counters()
    assert flooded["refused_quota"] > 0 and flooded["refused_full"] > 0
    print(f"\nafter the floods: {flooded['keys']} keys, {flooded['map_bytes']} bytes, "
          f"kvstore RSS {kvstore_rss_kib(stack.run_dir)} kB")

    for scan in range(1, 5):
        result = acquire(stack, scan)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "pending" not in result.stdout and "kvstore full" not in result.stdout + result.stderr
    wait_until(lambda: set(stack.client.subtree(scan_prefix(4))) == {summary_key(4)}, 30, "scan 4 folded")
    wait_until(lambda: stack.counters().get("summaries_dropped", 0) == 2, 30, "the two oldest summaries dropped")
    after = stack.counters()
    print(f"after 4 scans: {after['keys']} keys ({after['stack_keys']} the stack's), {after['scans_folded']} scans "
          f"folded, {after['summaries_dropped']} summaries dropped, kvstore RSS {kvstore_rss_kib(stack.run_dir)} kB")
    assert not stack.client.subtree(scan_prefix(1)) and not stack.client.subtree(scan_prefix(2))  # the oldest first
    assert stack.client.get(summary_key(3)) is not None

    status = sectorflow_command("status", "--config", str(stack.path))
    assert status.returncode == 0, status.stderr
    row = next(line for line in status.stdout.splitlines() if line.split()[:1] == ["4"] and "complete" in line)
    assert "pending" not in row


def test_with_security_on_only_an_admitted_writer_floods_and_only_the_oldest_scans_go(make_config,
                                                                                      tmp_path: Path) -> None:
    """With [security] on, capacity is not an address's: a keyless flood never passes the handshake,
    a viewer writes nothing, and the only writable keys are the stack's own, each under its writer's
    role. An admitted operator that floods scan requests (the worst an operator key can do to the
    room) pushes out the oldest scans, never the one being written: the next scan is whole."""
    keyring = Keyring(tmp_path / "keys")
    config, path = make_config(detector=SMALL, kvstore=KVSTORE,
                               security={"enabled": True, "key_dir": str(keyring.beamline)})
    with stack_up(config, path, tmp_path / "run", tmp_path / "h5", START_S) as client:
        stack = Stack(config, path, tmp_path / "run", client)
        assert acquire(stack, 1).returncode == 0

        keyless = RawPeer(config.kvstore.port)
        try:
            wait_until(lambda: keyless.kvset(b"flood/keyless", VALUE) or stack.counters().get("unauthenticated", 0) > 0,
                       FLOOD_S, "the keyless writer refused at the handshake")
        finally:
            keyless.close()
        with Client.from_config(config, name="viewer-flood", role="viewer") as viewer:
            assert viewer.wait_synced(30)
            viewer.set("flood/viewer", VALUE)
            wait_until(lambda: stack.counters().get("unauthorised", 0) > 0, FLOOD_S, "the viewer's write refused")
        assert client.get("flood/keyless") is None and client.get("flood/viewer") is None

        with Client.from_config(config, name="operator-flood", role="operator") as operator:
            assert operator.wait_synced(30)
            for scan in range(1000, 1100):  # 100 scans' requests: more than the room's 40 keys
                operator.set(scan_request_key(scan), VALUE)
            wait_until(lambda: client.get(scan_request_key(1099)) is not None, FLOOD_S, "the flood's last request")
        # The server publishes its counters every heartbeat: wait for the ones after the flood.
        wait_until(lambda: stack.counters().get("scans_evicted", 0) > 0, FLOOD_S, "the oldest scans evicted")
        assert client.get(scan_request_key(1)) is None  # the oldest went first
        flooded = stack.counters()
        assert flooded["refused_quota"] == 0 and flooded["refused_stack"] == 0  # the stack's room has no quota

        result = acquire(stack, 2)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "complete: 1024 counted" in result.stdout and "kvstore full" not in result.stdout + result.stderr

        # An admitted NodeGroup key (the role that writes the file) forging scan 2's summary, and the
        # summary of a scan never finished, which would erase its parts: only the server folds.
        wait_until(lambda: client.get(summary_key(2)) is not None, FLOOD_S, "scan 2 folded")
        folded = client.get(summary_key(2))
        with Client.from_config(config, name="nodegroup-fold", role="nodegroup") as forger:
            assert forger.wait_synced(30)
            forger.set_once(summary_key(2), VALUE)
            forger.set_once(summary_key(3), VALUE)
            wait_until(lambda: stack.counters().get("refused_fold", 0) == 2, FLOOD_S, "the forged summaries refused")
        assert client.get(summary_key(2)) == folded and client.get(summary_key(3)) is None
        assert ScanFileRecord.decode(decode_parts(folded)["file"]).outcome == "complete"


def test_a_finished_scan_folds_into_its_summary_and_acquire_and_status_read_the_same_account(stack: Stack) -> None:
    first = acquire(stack, 1)
    assert first.returncode == 0, first.stdout + first.stderr
    wait_until(lambda: set(stack.client.subtree(scan_prefix(1))) == {summary_key(1)}, 30, "scan 1 folded")
    folded = stack.client.subtree(scan_prefix(1))
    parts = decode_parts(folded[summary_key(1)])
    assert {"claim", "request", "file", "aggregator/t0", "producer/r0t0"} <= set(parts)
    as_parts = {scan_prefix(1) + part: raw for part, raw in parts.items()}
    from_summary = account(records_of(folded, 1))
    assert from_summary.outcome == COMPLETE and from_summary.line() == account(records_of(as_parts, 1)).line()
    assert from_summary.line() in first.stdout  # what acquire --wait said, from the parts or the summary

    status = sectorflow_command("status", "--config", str(stack.path))
    assert status.returncode == 0, status.stderr
    row = next(line.split() for line in status.stdout.splitlines() if line.split()[:1] == ["1"])
    assert row[:5] == ["1", "16", "x", "16", "complete"] and row[5] == f"{from_summary.counted:,}", row

    again = sectorflow_command("acquire", "--config", str(stack.path), "--scan-number", "1", "--scan-shape", "16x16",
                               timeout_s=60)
    assert again.returncode != 0
    assert f"scan 1 was acquired before (outcome complete: {from_summary.path})" in again.stderr, again.stderr


def test_a_room_too_small_for_one_scan_says_kvstore_full_not_pending(make_config: Callable, tmp_path: Path) -> None:
    """The smallest room (16 keys) holds the stack's registrations and statuses (12) and the first
    few records of a scan, and no older scan is there to erase: the rest of the scan's records are
    refused. The scan is counted on disk, but its account cannot settle: acquire and status say why."""
    config, path = make_config(detector=SMALL, kvstore={"max_stack_keys": 16})
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output, START_S) as client:
        stack = Stack(config, path, tmp_path / "run", client)
        result = sectorflow_command("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", "16x16",
                                    "--rate", "0", "--wait", "--timeout", "20", timeout_s=120)
        assert result.returncode == 1, result.stdout + result.stderr
        line = re.search(r"^scan 1: kvstore full: (\d+) of the stack's records refused, its room holds no older scan "
                         r"to erase \(\[kvstore\] max_stack_keys, max_stack_bytes\): (\d+) counted \+ 0 spilled \+ "
                         r"(\d+) missing \+ (\d+) pending = 1024 sectors$", result.stdout, re.MULTILINE)
        assert line, result.stdout + result.stderr
        refused, counted, missing, pending = (int(line.group(i)) for i in range(1, 5))
        assert 0 < refused <= stack.counters()["refused_stack"] and counted + missing + pending == 1024
        assert stack.counters()["scans_evicted"] == 0  # the scan being written is never erased
        # What could not be recorded was still counted: the file is whole.
        wait_until(lambda: (output / scan_file_name(1)).exists(), START_S, "scan 1's file")
        counted_scan = read_counted_scan(output / scan_file_name(1))
        assert counted_scan.missing_positions.tolist() == [] and counted_scan.incomplete_positions.tolist() == []
        status = sectorflow_command("status", "--config", str(path))
        assert status.returncode == 0, status.stderr
        row = next(text for text in status.stdout.splitlines() if text.split()[:1] == ["1"])
        assert "kvstore full" in row and "pending" not in row, status.stdout
