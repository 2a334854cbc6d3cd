"""`sectorflow producer` daemons and `sectorflow acquire` end to end: 4 receivers of 2 threads on a
small detector; a scan with no NodeGroup lands on disk, the next one (a NodeGroup registered in
between) streams, a replay streams the first one's files; SIGTERM stops cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from producer_support import (
    SMALL_DETECTOR,
    START_S,
    digest,
    small_receivers,
    start_kvstore,
    start_standin,
    upstream_for,  # noqa: F401  (fixture)
    wait_for_nodegroups,
)
from support import wait_until

from sectorflow.kvstore import Client
from sectorflow.protocol import (
    AcquireRequest,
    ProducerScanRecord,
    RawFileReader,
    find_raw_files,
    raw_file_name,
    scan_prefix,
    scan_producer_key,
)
from sectorflow.operations.scan_account import records_of
from sectorflow.simulator import simulator_from_config

ACQUIRE_S = 60.0


def finished_records(client: Client, scan: int) -> dict[tuple[int, int], int]:
    """(receiver, thread) -> sectors sent, of the producer threads whose record of ``scan`` says finished."""
    records = records_of(client.subtree(scan_prefix(scan)), scan)
    return {name: part.sent for name, part in records.producers.items() if part.state == "finished"}


def acquire(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", "acquire", "--config", str(path), *args],
                          capture_output=True, text=True, timeout=ACQUIRE_S)


def test_daemons_acquire_to_disk_then_stream_then_replay(make_config, processes, tmp_path: Path, upstream_for) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(2))
    config, path = server.config, server.path
    upstream = upstream_for(config)
    daemons = [processes.sectorflow("producer", "--config", str(path), "--receiver", str(r), name=f"producer{r}")
               for r in range(4)]
    with Client.from_config(config, name="test") as client:
        wait_until(lambda: len(client.statuses("producer")) == 8, START_S, "8 producer threads to report idle")
        assert {s.state for s in client.statuses("producer").values()} == {"idle"}

        # Scan 1: no NodeGroup -> every thread writes its sector to disk, which is what was asked: exit 0,
        # "on disk, not counted" with the command that counts it.
        result = acquire(path, "--scan-number", "1", "--scan-shape", "4x3", "--wait", "--timeout", "30")
        assert result.returncode == 0, result.stderr
        assert "no NodeGroup registered" in result.stdout
        assert (f"scan 1: on disk, not counted: 48 on disk + 0 missing = 48 sectors; count it with: sectorflow "
                f"acquire --config {path.resolve()} --scan-number 1 --scan-shape 4x3 --replay --wait") in result.stdout
        files = find_raw_files(config.producer.fallback_dir, 1)
        assert len(files) == 8
        assert sorted(line.split("written to ")[1] for line in result.stdout.splitlines()
                      if "written to " in line) == sorted(str(f) for f in files)
        on_disk = {}
        for file in files:
            for header, pixels in RawFileReader(file, config.geometry()):
                on_disk[(header.frame_number, header.sector)] = digest(pixels.tobytes())
        sim = simulator_from_config(config)
        assert on_disk == {(f, s): digest(sim.sector(1, f, s).tobytes()) for f in range(12) for s in range(4)}
        assert upstream.drain() == 0, "nothing streamed during a fallback scan"

        # A NodeGroup registers; scan 2 streams with no other action. The stand-in writes no file,
        # so the test reads the producers' records rather than waiting for the scan's outcome.
        start_standin(processes, path, tmp_path, "ng-a")
        wait_for_nodegroups(client, ["ng-a"])
        result = acquire(path, "--scan-number", "2", "--scan-shape", "4x3")
        assert result.returncode == 0, result.stderr
        assert "streaming to 1 NodeGroups: ng-a" in result.stdout and "not yet taken" not in result.stderr
        upstream.collect(8, 48, "scan 2's messages")
        assert Counter((h[2], h[3]) for _, h, _ in upstream.data) == Counter((f, s) for f in range(12) for s in range(4))
        assert all(info["counts"] == {"ng-a": 6} for _, info in upstream.infos)
        assert not find_raw_files(config.producer.fallback_dir, 2)
        wait_until(lambda: finished_records(client, 2) == {(r, t): 6 for r in range(4) for t in range(2)}, START_S,
                   "scan 2's producer records")
        upstream.clear()

        # Replay scan 1 from its files: the same sectors stream.
        result = acquire(path, "--scan-number", "1", "--scan-shape", "4x3", "--replay")
        assert result.returncode == 0, result.stderr
        upstream.collect(8, 48, "the replayed scan 1")
        assert {(h[2], h[3]): digest(payload) for _, h, payload in upstream.data} == on_disk
        assert len(upstream.data) == 48

        # A scan number already used is refused at once (the producers would ignore the request), --wait
        # or not, as a bad argument (exit 2) with what became of it; nothing is requested. Scan 2 spilled
        # nothing: no replay named.
        for wait in ((), ("--wait",)):
            result = acquire(path, "--scan-number", "2", "--scan-shape", "4x3", *wait)
            assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
            assert result.stderr.splitlines()[-1] == (
                "sectorflow acquire: error: scan 2 was acquired before (no file yet: it is running, or its NodeGroups "
                "never wrote one): a scan number is used once; the next unused is 3")
        assert client.get("acquire/request") is not None and AcquireRequest.decode(
            client.get("acquire/request")).source == "replay", "the replay of scan 1 is the last request"
    for daemon in daemons:
        assert processes.stop(daemon) == 0
        assert "Traceback" not in processes.output(daemon)
    log = processes.output(daemons[0])
    # Scan 1 was first acquired with no NodeGroup registered: written to disk.
    assert "state idle -> writing-to-disk (scan 1" in log and "state writing-to-disk -> idle" in log
    assert "state idle -> streaming (scan 2" in log and "state stopping -> stopped" in log


def test_ctrl_c_in_acquire_wait_says_the_scan_goes_on(make_config, processes) -> None:
    # No producer runs: acquire --wait would take the producers for dead (exit 1) after the
    # statuses' ttl and a grace; a long ttl keeps it waiting well past the Ctrl-C on a loaded machine.
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1),
                           kvstore={"ttl_s": 60.0})
    waiting = processes.sectorflow("acquire", "--config", str(server.path), "--scan-number", "4", "--scan-shape",
                                   "2x2", "--wait", name="acquire")
    wait_until(lambda: "scan 4: requested 2 x 2" in processes.output(waiting), START_S, "the request published")
    waiting.send_signal(signal.SIGINT)  # what Ctrl-C sends
    wait_until(lambda: waiting.poll() is not None, START_S, "acquire to end")
    assert waiting.returncode == 130, processes.output(waiting)
    assert processes.output(waiting).splitlines()[-1] == (
        f"scan 4: no longer waited for; the scan goes on (the producers and NodeGroups do not stop): 'sectorflow "
        f"status --config {server.path}' shows it, 'sectorflow abort --config {server.path} 4' stops it")


def test_acquire_refuses_a_bad_scan_shape_and_replay_without_nodegroups(make_config, processes) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1))
    for shape in ("0x4", "4x", "4x-1"):
        result = acquire(server.path, "--scan-number", "1", "--scan-shape", shape)
        assert result.returncode == 2  # a usage error, as acquire --help says
        assert result.stderr.startswith(f"sectorflow acquire: error: scan shape '{shape}'"), result.stderr
    # A scan with no raw file anywhere has nothing to replay: a bad --scan-number for --replay.
    result = acquire(server.path, "--scan-number", "1", "--scan-shape", "2x2", "--replay")
    assert result.returncode == 2 and "scan 1 has no raw files to replay" in result.stderr, result.stderr
    raw = Path(server.config.producer.fallback_dir)
    raw.mkdir(parents=True, exist_ok=True)
    (raw / raw_file_name(1, 0)).write_bytes(b"")
    result = acquire(server.path, "--scan-number", "1", "--scan-shape", "2x2", "--replay")
    assert result.returncode == 1 and "--replay needs a registered NodeGroup" in result.stderr, result.stderr
    with Client.from_config(server.config, name="test") as client:
        assert client.wait_synced(START_S) and client.get("acquire/request") is None, "nothing was requested"


def test_daemon_records_refused_and_failed_scans_and_summarises_each(make_config, processes) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(2),
                           limits={"max_scan_positions": 16})
    config, path = server.config, server.path
    daemon = processes.sectorflow("producer", "--config", str(path), "--receiver", "0", name="producer0")
    with Client.from_config(config, name="test") as client:
        wait_until(lambda: len(client.statuses("producer")) == 2, START_S, "2 producer threads to report idle")

        def request(scan: int, scan_x: int, scan_y: int, **fields: object) -> None:
            client.set_once("acquire/request", AcquireRequest(scan_number=scan, scan_x=scan_x, scan_y=scan_y,
                                                              **fields).encode(), 0.0)

        def records(scan: int, state: str) -> list[ProducerScanRecord]:
            keys = [scan_producer_key(scan, 0, t) for t in range(2)]

            def current() -> list[ProducerScanRecord]:
                return [ProducerScanRecord.decode(raw) for raw in map(client.get, keys) if raw is not None]

            wait_until(lambda: [r.state for r in current()] == [state, state], START_S, f"scan {scan}'s records")
            return current()

        # A shape beyond [limits] max_scan_positions is refused: each thread records why, and what it owned.
        request(1, 5, 5, routing=[])
        refused = records(1, "error")
        assert [r.owned for r in refused] == [13, 12]
        assert all("positions" in r.error and r.sent == r.spilled == 0 for r in refused)

        # A replay whose raw files do not exist cannot open its source.
        request(2, 4, 3, routing=["ng-a"], source="replay")
        unopened = records(2, "error")
        assert [r.owned for r in unopened] == [6, 6] and all(r.error for r in unopened)

        # A fallback scan: the summary line says sent, spilled and missing.
        request(3, 4, 3, routing=[])
        assert [r.spilled for r in records(3, "finished")] == [6, 6]
    assert processes.stop(daemon) == 0
    log = processes.output(daemon)
    assert "Traceback" not in log
    assert (f"scan 3: receiver 0, 12 sectors in " in log and
            f"s: sent 0, spilled 12 to {config.producer.fallback_dir}, missing 0 (0 lost upstream)" in log), log
