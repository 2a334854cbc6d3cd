"""Faults a beamline meets, each on the real stack (4D Camera geometry, 2 MPI ranks, small scans): every
sector of the scan ends counted, spilled or missing, the three add up to the scan's sectors and agree with
the file and the raw files on disk, ``sectorflow acquire --wait`` exits with the outcome, and no file written
before the fault changes.

Each test prints its row of the fault table (fault | sectors | sent | counted | spilled | missing | outcome |
exit code); ``pytest tests/faults -s`` shows them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest
import zmq
from beamline import RANKS, Beamline, Outcome

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration.stack import stack_services
from sectorflow.orchestration.supervisor import ServiceSpec
from sectorflow.operations.scan_account import records_of
from sectorflow.protocol import ACQUIRE_REQUEST_KEY, AcquireRequest, find_replay_files, scan_prefix
from sectorflow.waiting import wait_until

pytestmark = pytest.mark.mpi

SHAPE, POSITIONS = "16x16", 256
RATE_HZ = 100.0  # about 2.6 s per scan: slow enough to hit it mid-scan
SECTORS = POSITIONS * 4


def checked(line: Beamline, outcome: Outcome, scan: int, fault: str, sectors: int = SECTORS,
            replay: bool = False) -> Outcome:
    """The account adds up and agrees with what is on disk; prints the table row.

    A replay spills nothing: the raw files on disk are the earlier run's.
    """
    assert outcome.sectors == sectors, outcome.output
    assert outcome.counted + outcome.spilled + outcome.on_disk + outcome.missing == outcome.sectors, outcome.output
    assert outcome.path is None or outcome.path.parent == line.output_dir, outcome.output
    on_file = line.sectors_in_file(outcome.path) if outcome.path is not None else 0
    assert outcome.counted == on_file, outcome.output
    if not replay:
        assert outcome.spilled + outcome.on_disk == line.records_on_disk(scan), outcome.output
    else:
        assert outcome.spilled == 0, outcome.output
    print(outcome.row(fault, line.sent(scan)))
    print("\n".join(f"    {text}" for text in outcome.output.splitlines() if text.startswith("  ")))
    return outcome


def reasons_are(result: Outcome, *allowed: str) -> None:
    """Every missing sector is placed, and only where this fault puts it: each reason of the account
    (``<count> <where>``) matches one of the ``allowed`` patterns, and a receiver's counts add up to
    its missing sectors."""
    for receiver, (missing, reasons) in result.reasons().items():
        placed = [reason.split(" ", 1) for reason in reasons if reason[:1].isdigit()]
        assert sum(int(count) for count, _ in placed) == missing, (receiver, reasons)
        for _, where in placed:
            assert any(re.fullmatch(pattern, where) for pattern in allowed), (receiver, where)


def mid_scan(line: Beamline, fault: Callable[[Client], None]) -> subprocess.Popen[str]:
    """Starts scan 2 (paced) with ``acquire --wait`` and strikes ``fault`` once a quarter of it is sent."""
    with Client.from_config(line.config, name="fault-test") as client:
        client.wait_synced(10.0)
        acquire = line.acquire(2, SHAPE, RATE_HZ)
        line.wait_sent(client, 2, SECTORS // 4)
        fault(client)
    return acquire


def first_scan(line: Beamline) -> dict[str, str]:
    """A clean scan before the fault: complete, exit 0; returns the checksums no fault may change."""
    result = checked(line, Beamline.finish(line.acquire(1, "4x4", 0.0)), 1, "none (scan before the fault)", 64)
    assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, 64), result.output
    return line.checksums()


def test_no_fault_every_sector_counted(beamline) -> None:
    line = beamline()
    line.start()
    before = first_scan(line)
    result = checked(line, Beamline.finish(line.acquire(2, SHAPE, 0.0)), 2, "none")
    reasons_are(result)
    assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
    assert {k: v for k, v in line.checksums().items() if k in before} == before


@pytest.mark.parametrize("piece_events", [None, 200], ids=["default pieces", "pieces during the scan"])
def test_a_nodegroup_rank_killed_mid_scan(beamline, piece_events: int | None) -> None:
    # With 200-event pieces both ranks hand frames to rank 0 while the scan runs: the pieces of the
    # killed rank's part, and those of rank 0's own part that never ended, make no file either.
    line = beamline(**({"nodegroup": {"gather_piece_events": piece_events}} if piece_events else {}))
    supervisor = line.start()
    before = first_scan(line)
    with Client.from_config(line.config, name="fault-test") as client:
        client.wait_synced(10.0)
        ranks = line.rank_pids(client)
        acquire = mid_scan(line, lambda _: line.kill(ranks[1]))
        # The job is one unit: every NodeGroup of it leaves the kvstore.
        wait_until(lambda: not client.nodegroups(), 60, "every NodeGroup of the job to leave")
    result = checked(line, Beamline.finish(acquire), 2, "NodeGroup rank 1 killed mid-scan")
    # The whole job ends with its rank: rank 0 writes no file.
    assert (result.outcome, result.exit_code, result.counted) == ("failed", 1, 0), result.output
    assert "\n  no file: the NodeGroups the scan was routed to are gone\n" in result.output
    reasons_are(result, r"dropped at the aggregator: NodeGroup \S+ declared dead",
                r"forwarded to NodeGroup \S+, which wrote no record", r"forwarded to NodeGroup \S+ but not received",
                "received by NodeGroups but not in the file")
    assert supervisor.wait("nodegroups", 60) != 0
    assert {k: v for k, v in line.checksums().items() if k in before} == before


def test_the_aggregator_killed_and_restarted_mid_scan(beamline) -> None:
    line = beamline()
    line.start()
    before = first_scan(line)
    acquire = mid_scan(line, lambda _: line.restart("aggregator"))
    result = checked(line, Beamline.finish(acquire), 2, "aggregator killed and restarted mid-scan")
    # A restart costs at most what was in flight: most of the scan is counted after it.
    assert result.counted > SECTORS // 2, result.output
    assert result.exit_code == (0 if result.outcome == "complete" else 1 if result.missing else 3), result.output
    reasons_are(result, r"sent but not relayed \(not in aggregator thread \d+'s record: in flight when it stopped "
                        r"or restarted, or the scan closed unfinished there\)")
    assert {k: v for k, v in line.checksums().items() if k in before} == before


def test_the_aggregator_stopped_while_sending_to_nodegroups_that_do_not_read(beamline) -> None:
    # The NodeGroups stop reading (SIGSTOP) and the aggregator, which waits long before it declares a
    # NodeGroup dead, blocks sending to them; it is stopped (cleanly) in that send. The message in hand
    # is dropped without a NodeGroup declared dead: the account must not say the NodeGroup went.
    # Queues of one message and small kernel buffers: what a paced scan sends after the NodeGroups
    # stop cannot all fit on the way to them, so the relay blocks.
    line = beamline(aggregator={"send_timeout_ms": 600_000, "hwm": 1, "sndbuf_bytes": 65536},
                    nodegroup={"recv_hwm": 1, "rcvbuf_bytes": 65536}, producer={"send_timeout_ms": 1000})
    supervisor = line.start()
    before = first_scan(line)
    with Client.from_config(line.config, name="fault-test") as client:
        client.wait_synced(10.0)
        ranks = list(line.rank_pids(client).values())
        acquire = line.acquire(2, SHAPE, RATE_HZ)
        line.wait_sent(client, 2, SECTORS // 4)
        for pid in ranks:
            os.kill(pid, signal.SIGSTOP)
        try:
            # A producer spills once the aggregator took nothing for its send timeout: the relay is
            # blocked in a send to a stopped NodeGroup (the only place it waits).
            wait_until(lambda: any(p.spilled for p in records_of(client.subtree(scan_prefix(2)), 2).producers.values()),
                       60, "a producer to spill behind the blocked aggregator")
            supervisor.stop("aggregator")
        finally:
            for pid in ranks:
                os.kill(pid, signal.SIGCONT)
    result = checked(line, Beamline.finish(acquire), 2, "aggregator stopped in a send to NodeGroups not reading")
    assert result.spilled > 0 and result.missing > 0 and result.exit_code == 1, result.output
    reasons_are(result, r"dropped at the aggregator: NodeGroup \S+ not declared dead \(as the aggregator stopped, or "
                        r"after the scan closed there\)",
                r"sent but not relayed \(not in aggregator thread \d+'s record: in flight when it stopped or "
                r"restarted, or the scan closed unfinished there\)", r"forwarded to NodeGroup \S+ but not received",
                # Stopped longer than their liveness ttl, the ranks find their job gone from the kvstore and end it.
                r"forwarded to NodeGroup \S+, which wrote no record")
    assert "not declared dead" in result.output, result.output  # reasons_are leaves no room for "gone"
    assert {k: v for k, v in line.checksums().items() if k in before} == before


def test_a_nodegroup_that_registers_and_never_reads(beamline, tmp_path: Path) -> None:
    line = beamline(aggregator={"send_timeout_ms": 1000}, producer={"send_timeout_ms": 5000})
    supervisor = line.start()
    before = first_scan(line)
    standin = Path(__file__).resolve().parents[1] / "standins" / "nodegroup_standin.py"
    supervisor.start(ServiceSpec("deaf-nodegroup", (sys.executable, str(standin), "--config", str(line.config_path),
                                                    "--uid", "zz-deaf", "--out", str(tmp_path / "deaf.jsonl"),
                                                    "--never-read")))
    with Client.from_config(line.config, name="fault-test") as client:
        wait_until(lambda: "zz-deaf" in {r.uid for r in client.nodegroups()}, 30, "the deaf NodeGroup")
    result = checked(line, Beamline.finish(line.acquire(2, SHAPE, 0.0)), 2, "a NodeGroup that never reads")
    # Routing is over the sorted uids, the deaf one last: frames f % 3 == 2 are its, every other
    # frame is counted whole. The deaf one's are spilled by the producers once they learn it is
    # dead, or missing if they were queued towards it before (how many depends on the timing).
    deaf = len(range(2, POSITIONS, 3)) * 4
    assert result.counted == SECTORS - deaf, result.output
    assert result.spilled + result.missing == deaf, result.output
    assert result.exit_code == (1 if result.missing else 3), result.output
    reasons_are(result, "dropped at the aggregator: NodeGroup zz-deaf declared dead",
                "forwarded to NodeGroup zz-deaf, which wrote no record")
    assert {k: v for k, v in line.checksums().items() if k in before} == before


def test_an_output_directory_that_cannot_be_written(beamline, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the output directory should be")
    line = beamline(nodegroup={"output_dir": str(blocker / "counted")})
    line.output_dir = blocker / "counted"
    with pytest.raises(Exception, match="nodegroups"):
        line.start()  # the job refuses to start: it registers nothing
    line.stop()
    fallback = beamline()
    fallback.start(with_nodegroups=False)
    result = checked(fallback, Beamline.finish(fallback.acquire(2, SHAPE, 0.0)), 2,
                     "output directory unwritable (job refused; scan to raw files)")
    assert (result.outcome, result.exit_code, result.on_disk) == ("on disk, not counted", 0, SECTORS), result.output
    reasons_are(result)


def test_a_stray_part_for_a_scan_already_written_never_replaces_its_file(beamline) -> None:
    line = beamline()
    line.start()
    before = first_scan(line)
    with Client.from_config(line.config, name="fault-test") as client:
        client.wait_synced(10.0)
        target = client.nodegroups()[-1]
        # Scan 1 again, straight to a NodeGroup's port of receiver 0, as a stray sender would: the
        # expected count an aggregator sends, and one sector. The NodeGroup's part of it times out
        # on the other ports and goes to rank 0, which has written scan 1 already.
        info = msgpack.packb({"version": 1, "kind": "info", "scan_number": 1, "receiver": 0, "thread_id": 0,
                              "scan_x": 4, "scan_y": 4, "routing": [target.uid], "counts": {target.uid: 1}})
        header = msgpack.packb([2, 1, 0, 0, 4, 4, 0, 0, 0])
        with zmq.Context() as context, context.socket(zmq.PUSH) as push:
            push.setsockopt(zmq.LINGER, 5000)
            push.connect(f"tcp://{target.host}:{target.ports[0]}")
            push.send(info)
            push.send_multipart([header, bytes(line.config.detector.sector_bytes)])

        def refused() -> int:
            status = client.statuses("nodegroup").get(("nodegroup", target.uid))
            return 0 if status is None else int(status.extra.get("malformed_info", 0)) + \
                int(status.extra.get("late_messages", 0))

        # The NodeGroup still knows scan 1 as done: the stray count and sector are refused and counted.
        wait_until(lambda: refused() >= 2, 60, "the stray messages refused and counted")
    assert {k: v for k, v in line.checksums().items() if k in before} == before
    assert sorted(p.name for p in line.output_dir.iterdir()) == [scan_file_name(1)]
    print("| stray messages of a written scan | - | 2 | - | - | - | refused and counted, file unchanged | - |")


def test_disk_full_during_a_fallback_write(beamline, tmp_path: Path) -> None:
    raw = tmp_path / "small-disk"
    raw.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(raw)], check=True)
    try:
        line = beamline(producer={"fallback_dir": str(raw)})
        line.start(with_nodegroups=False)
        result = checked(line, Beamline.finish(line.acquire(2, SHAPE, 0.0)), 2, "disk full during a fallback write")
        assert (result.outcome, result.exit_code) == ("incomplete", 1), result.output
        assert result.missing > 0 and result.on_disk > 0, result.output
        reasons_are(result, r"not sent by thread 0: scan 2, frame \d+, sector \d: the raw file write failed: .*"
                            r"No space left on device \(errno 28\)")
        assert "count it with: sectorflow acquire" in result.output  # what is on disk, a replay counts
        names = [p.name for p in raw.iterdir()]
        assert any(name.endswith(".partial") for name in names), names
        # What was counted spilled is replayable: the whole records of the .partial files stream too.
        assert any(path.endswith(".partial") for path in find_replay_files(str(raw), 2)), names
        assert line.supervisor is not None
        nodegroups = next(spec for spec in stack_services(line.config, RANKS, line.output_dir, with_nodegroups=True)
                          if spec.name == "nodegroups")
        line.supervisor.start(nodegroups)
        with Client.from_config(line.config, name="fault-test") as client:
            wait_until(lambda: len(client.nodegroups()) == RANKS, 60, "the NodeGroups of a job started later")
        replay = checked(line, Beamline.finish(line.acquire(2, SHAPE, 0.0, "--replay")), 2,
                         "replay of a full disk's raw files (.partial included)", replay=True)
        assert replay.counted == result.on_disk, replay.output
        assert replay.missing == SECTORS - result.on_disk and replay.exit_code == 1, replay.output
        reasons_are(replay, "not in the receiver's raw files")
        line.stop()
    finally:
        subprocess.run(["umount", "-l", str(raw)], check=False)


def test_a_producer_killed_mid_scan(beamline) -> None:
    line = beamline()
    supervisor = line.start()
    before = first_scan(line)
    acquire = mid_scan(line, lambda _: line.kill(supervisor.process("producer-1").pid))
    result = checked(line, Beamline.finish(acquire), 2, "producer 1 killed mid-scan")
    assert (result.outcome, result.exit_code) == ("incomplete", 1), result.output
    assert 0 < result.missing < POSITIONS, result.output  # only receiver 1's unsent sectors
    reasons_are(result, "not sent by thread 0, which died mid-scan")
    assert "producer thread 0 died mid-scan" in result.output
    assert {k: v for k, v in line.checksums().items() if k in before} == before


def test_a_producer_killed_before_it_took_the_request(beamline) -> None:
    line = beamline()
    supervisor = line.start()
    before = first_scan(line)
    pid = supervisor.process("producer-1").pid
    os.kill(pid, signal.SIGSTOP)  # it cannot take the request: the others do and stream
    with Client.from_config(line.config, name="fault-test") as client:
        client.wait_synced(10.0)
        acquire = line.acquire(2, SHAPE, 0.0)
        wait_until(lambda: {r for r, _ in records_of(client.subtree(scan_prefix(2)), 2).producers} == {0, 2, 3}, 60,
                   "receivers 0, 2 and 3 to take scan 2")
        line.kill(pid)
    result = checked(line, Beamline.finish(acquire), 2, "producer 1 killed before it took the request")
    assert (result.outcome, result.exit_code, result.counted, result.missing) == \
        ("incomplete", 1, SECTORS - POSITIONS, POSITIONS), result.output
    reasons_are(result, "not sent by thread 0, which died before it wrote a record of the scan")
    assert result.reasons()[1] == (POSITIONS, [f"{POSITIONS} not sent by thread 0, which died before it wrote a "
                                               "record of the scan"])
    # Receiver 1's count never came: each NodeGroup timed out, and the file says which frames lack it.
    assert re.findall(r"^  NodeGroup \S+: (.*)$", result.output, re.MULTILINE) == \
        ["timed out, 0 late, 0 duplicate sectors dropped"] * RANKS, result.output
    assert f"  file: incomplete: {POSITIONS} frames incomplete; timed out ([nodegroup] scan_timeout_s)\n" in \
        result.output, result.output
    assert {k: v for k, v in line.checksums().items() if k in before} == before


def test_the_kvstore_killed_and_restarted_mid_scan(beamline) -> None:
    line = beamline()
    line.start()
    before = first_scan(line)
    acquire = mid_scan(line, lambda _: line.restart("kvstore"))
    result = checked(line, Beamline.finish(acquire), 2, "kvstore killed and restarted mid-scan")
    assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
    reasons_are(result)
    assert {k: v for k, v in line.checksums().items() if k in before} == before


def requested(client: Client) -> int | None:
    """The scan number of the acquire request in the replica, if any."""
    raw = client.get(ACQUIRE_REQUEST_KEY)
    return None if raw is None else AcquireRequest.decode(raw).scan_number


def test_a_request_the_kvstore_lost_before_the_producers_took_it(beamline) -> None:
    line = beamline()
    supervisor = line.start()
    first_scan(line)
    producers = [supervisor.process(f"producer-{r}").pid for r in range(line.config.n_receivers)]
    for pid in producers:
        os.kill(pid, signal.SIGSTOP)  # busy elsewhere: they cannot take the request yet
    try:
        with Client.from_config(line.config, name="fault-test") as client:
            client.wait_synced(10.0)
            acquire = line.acquire(2, SHAPE, 0.0)
            wait_until(lambda: requested(client) == 2, 30, "scan 2's request published")
        line.restart("kvstore")
        with Client.from_config(line.config, name="fault-test-2") as client:
            client.wait_synced(30.0)
            # Nobody owns the request: only acquire, which waits for the producers to take it, writes it again.
            wait_until(lambda: requested(client) == 2, 60, "scan 2's request published again")
    finally:
        for pid in producers:
            os.kill(pid, signal.SIGCONT)
    result = checked(line, Beamline.finish(acquire), 2, "kvstore restarted before the producers took the request")
    assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
    assert "published again" in result.output, result.output


def test_a_scan_spilled_while_the_aggregator_stalls_is_completed_by_replay(beamline) -> None:
    line = beamline(producer={"send_timeout_ms": 1000})
    supervisor = line.start()
    before = first_scan(line)
    aggregator = supervisor.process("aggregator").pid
    acquire = mid_scan(line, lambda _: os.kill(aggregator, signal.SIGSTOP))
    try:
        first = checked(line, Beamline.finish(acquire), 2, "the aggregator stalls mid-scan (SIGSTOP)")
    finally:
        os.kill(aggregator, signal.SIGCONT)
    # The producers spilled what the aggregator would not take; the file holds what came before.
    assert first.spilled > 0 and first.exit_code == (1 if first.missing else 3), first.output
    # What the stalled process held when the NodeGroups timed out: it wrote no record of the scan.
    reasons_are(first, r"sent, not counted, no record from aggregator thread \d")
    written = line.checksums()
    # A NodeGroup job remembers the scans it counted and refuses another count for them: the replay
    # goes to the next job (a new streaming session), whose rank 0 finds the scan's file written.
    line.restart("nodegroups", kill=False)
    with Client.from_config(line.config, name="fault-test") as client:
        wait_until(lambda: len(client.nodegroups()) == 2, 60, "the next job's NodeGroups")
    replay = checked(line, Beamline.finish(line.acquire(2, SHAPE, 0.0, "--replay")), 2,
                     "replay of the spilled sectors", replay=True)
    # The replayed sectors join the counted ones in a new file; the first file is never touched.
    assert replay.counted == first.counted + first.spilled, replay.output
    assert replay.missing == first.missing and replay.exit_code == (1 if first.missing else 0), replay.output
    reasons_are(replay, "not in the receiver's raw files")
    assert {k: v for k, v in line.checksums().items() if k in written} == written
    assert {k: v for k, v in written.items() if k in before} == before


def test_a_replay_with_one_receivers_raw_files_gone_counts_the_others(beamline) -> None:
    """No frame of the replay is whole, so the thresholds come from the sectors that came; the
    receiver with no file replays nothing (also a receiver that spilled nothing of a scan)."""
    line = beamline()
    supervisor = line.start(with_nodegroups=False)
    written = checked(line, Beamline.finish(line.acquire(2, SHAPE, 0.0)), 2, "no NodeGroup: the scan to raw files")
    assert written.on_disk == SECTORS, written.output
    for path in line.raw_dir.glob("*module2*"):
        path.unlink()
    nodegroups = next(spec for spec in stack_services(line.config, RANKS, line.output_dir, with_nodegroups=True)
                      if spec.name == "nodegroups")
    supervisor.start(nodegroups)
    with Client.from_config(line.config, name="fault-test") as client:
        wait_until(lambda: len(client.nodegroups()) == RANKS, 60, "the NodeGroups of a job started later")
    replay = checked(line, Beamline.finish(line.acquire(2, SHAPE, 0.0, "--replay")), 2,
                     "replay with receiver 2's raw files gone", replay=True)
    assert (replay.counted, replay.missing, replay.exit_code) == (SECTORS - POSITIONS, POSITIONS, 1), replay.output
    reasons_are(replay, "not in the receiver's raw files")
    counted = read_counted_scan(replay.path)
    assert len(counted.missing_positions) == 0 and sum(len(events) for events in counted.events) > 0
