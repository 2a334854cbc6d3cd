"""The account of a scan from its records: counted + spilled (or on disk) + missing (+ pending while it
runs) = sectors, the outcome, the reasons."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from sectorflow.operations.status_table import render
from sectorflow.protocol import (
    OUTCOME_COMPLETE,
    OUTCOME_FAILED,
    OUTCOME_INCOMPLETE,
    STATE_ERROR,
    STATE_FINISHED,
    STATE_STREAMING,
    STATE_WRITING_TO_DISK,
    NodeGroupScanRecord,
    PortRun,
    ServiceStatus,
    ProducerScanRecord,
    RelayScanRecord,
    ScanFileRecord,
    ScanRequestRecord,
    scan_file_key,
    scan_nodegroup_key,
    scan_producer_key,
    scan_relay_key,
    scan_request_key,
    status_key,
)
from sectorflow.operations.scan_account import (
    ABORTED,
    COMPLETE,
    FAILED,
    INCOMPLETE,
    ON_DISK,
    PENDING,
    SPILLED,
    abandoned_producers,
    account,
    kvstore_full,
    libertem_notes,
    records_of,
    scans_in,
)
from sectorflow.protocol.scan_life import ScanAbort, abort_key, claim_key

SCAN = 7
POSITIONS = 16  # a 4 x 4 scan
GROUPS = ["ng-a", "ng-b"]


def request(routing: list[str] | None = None) -> ScanRequestRecord:
    return ScanRequestRecord(scan_number=SCAN, scan_x=4, scan_y=4, source="simulator",
                             routing=GROUPS if routing is None else routing, producer_threads=[1, 1],
                             requested_s=100.0)


def producer(receiver: int, **fields: Any) -> ProducerScanRecord:
    values: dict[str, Any] = dict(receiver=receiver, thread=0, state=STATE_FINISHED, routing=GROUPS,
                                  counts={"ng-a": 8, "ng-b": 8}, owned=POSITIONS, lost_upstream=0, sent=POSITIONS,
                                  spilled=0, spill_file="", partial=False, error="", updated_s=101.0)
    values.update(fields)
    return ProducerScanRecord(**values)


def relay(thread: int, **fields: Any) -> RelayScanRecord:
    values: dict[str, Any] = dict(thread=thread, complete=True, forwarded={"ng-a": 8, "ng-b": 8}, lost={}, dead=[],
                                  updated_s=101.0)
    values.update(fields)
    return RelayScanRecord(**values)


def nodegroup(uid: str, received: list[int], **fields: Any) -> NodeGroupScanRecord:
    values: dict[str, Any] = dict(uid=uid, expected=[8, 8], received=received, frames_complete=8,
                                  frames_incomplete=0, sectors_counted=sum(received), late=0, duplicates=0,
                                  timed_out=False, updated_s=102.0)
    values.update(fields)
    return NodeGroupScanRecord(**values)


def file(counted: list[int], outcome: str = OUTCOME_COMPLETE, reason: str = "") -> ScanFileRecord:
    return ScanFileRecord(outcome=outcome, path="/data/FOURD_0000000007_counted.h5", extra_paths=[],
                          positions=POSITIONS, frames_written=POSITIONS, positions_missing=0,
                          sectors_counted=counted, reason=reason, written_s=103.0)


def entries(req: ScanRequestRecord | None = None, producers: list[ProducerScanRecord] = (),
            relays: list[RelayScanRecord] = (), groups: list[NodeGroupScanRecord] = (),
            scan_file: ScanFileRecord | None = None) -> dict[str, bytes]:
    out = {}
    if req is not None:
        out[scan_request_key(SCAN)] = req.encode()
    for part in producers:
        out[scan_producer_key(SCAN, part.receiver, part.thread)] = part.encode()
    for part in relays:
        out[scan_relay_key(SCAN, part.thread)] = part.encode()
    for part in groups:
        out[scan_nodegroup_key(SCAN, part.uid)] = part.encode()
    if scan_file is not None:
        out[scan_file_key(SCAN)] = scan_file.encode()
    return out


def whole_stream(**overrides: Any) -> dict[str, bytes]:
    parts: dict[str, Any] = dict(req=request(), producers=[producer(0), producer(1)], relays=[relay(0), relay(1)],
                                 groups=[nodegroup("ng-a", [8, 8]), nodegroup("ng-b", [8, 8])],
                                 scan_file=file([16, 16]))
    parts.update(overrides)
    return entries(**parts)


def test_every_sector_counted_is_complete_and_exits_0() -> None:
    result = account(records_of(whole_stream(), SCAN))
    assert (result.outcome, result.exit_code) == (COMPLETE, 0)
    assert (result.sectors, result.counted, result.spilled, result.missing) == (32, 32, 0, 0)
    assert result.line() == ("scan 7: complete: 32 counted + 0 spilled + 0 missing = 32 sectors; "
                             "file /data/FOURD_0000000007_counted.h5")


def test_a_scan_written_to_disk_for_want_of_a_nodegroup_is_on_disk_not_counted_with_its_replay_command() -> None:
    written = [producer(r, routing=[], counts={}, sent=0, spilled=POSITIONS, spill_file=f"/raw/r{r}.data")
               for r in (0, 1)]
    result = account(records_of(entries(request(routing=[]), written), SCAN))
    # As planned, so exit 0; but nothing was counted, and nothing was spilled by a fault.
    assert (result.outcome, result.exit_code) == (ON_DISK, 0)
    assert (result.on_disk, result.spilled, result.counted, result.missing) == (32, 0, 0, 0)
    assert result.spill_files == ["/raw/r0.data", "/raw/r1.data"]
    assert result.replay_command("/etc/my beamline.toml") == (
        "sectorflow acquire --config '/etc/my beamline.toml' --scan-number 7 --scan-shape 4x4 --replay --wait")
    assert result.line("/c.toml") == ("scan 7: on disk, not counted: 32 on disk + 0 missing = 32 sectors; count it "
                                      "with: sectorflow acquire --config /c.toml --scan-number 7 --scan-shape 4x4 "
                                      "--replay --wait")
    assert result.breakdown() == ["  receiver 0: 16 on disk, 0 missing", "  receiver 1: 16 on disk, 0 missing",
                                  "  written to /raw/r0.data", "  written to /raw/r1.data"]
    # Still being written: pending, with no replay command yet.
    running = account(records_of(entries(request(routing=[]), [
        written[0], producer(1, routing=[], counts={}, sent=0, spilled=5, state=STATE_WRITING_TO_DISK)]), SCAN))
    assert (running.outcome, running.on_disk, running.pending, running.missing) == (PENDING, 21, 11, 0)
    assert running.line("/c.toml") == "scan 7: pending: 21 on disk + 0 missing + 11 pending = 32 sectors"


def test_sectors_spilled_for_a_dead_nodegroup_and_none_missing_exit_3() -> None:
    # ng-b died after 3 of receiver 1's sectors: the producer spilled its other 5.
    records = whole_stream(
        producers=[producer(0), producer(1, sent=11, spilled=5, spill_file="/raw/r1.data")],
        relays=[relay(0), relay(1, forwarded={"ng-a": 8, "ng-b": 3}, dead=["ng-b"], complete=False)],
        groups=[nodegroup("ng-a", [8, 8]), nodegroup("ng-b", [8, 3])],
        scan_file=file([16, 11], OUTCOME_INCOMPLETE, "5 positions lack a sector"))
    result = account(records_of(records, SCAN))
    assert (result.outcome, result.exit_code) == (SPILLED, 3)
    assert (result.counted, result.spilled, result.missing) == (27, 5, 0)


def test_missing_sectors_say_where_they_were_last_seen() -> None:
    records = whole_stream(
        producers=[producer(0, lost_upstream=1, sent=15),
                   producer(1, state=STATE_ERROR, sent=12, error="stopped")],
        relays=[relay(0, forwarded={"ng-a": 8, "ng-b": 5}, lost={"ng-b": 2}, dead=["ng-b"], complete=False),
                relay(1, forwarded={"ng-a": 6, "ng-b": 6})],
        groups=[nodegroup("ng-a", [8, 5]), nodegroup("ng-b", [5, 6])],
        scan_file=file([13, 10], OUTCOME_INCOMPLETE, "9 positions lack a sector"))
    result = account(records_of(records, SCAN))
    assert (result.outcome, result.exit_code) == (INCOMPLETE, 1)
    assert (result.counted, result.spilled, result.missing) == (23, 0, 9)
    assert result.receivers[0].reasons == ["1 never reached the producer",
                                           "2 dropped at the aggregator: NodeGroup ng-b declared dead"]
    assert result.receivers[1].reasons == ["4 not sent by thread 0: stopped",
                                           "1 forwarded to NodeGroup ng-a but not received",
                                           "1 received by NodeGroups but not in the file"]
    assert result.counted + result.spilled + result.missing == result.sectors


def test_sent_but_not_relayed_is_the_aggregators_restart_and_never_claims_more_than_is_missing() -> None:
    # The restarted relay thread 0 counts only its own 6 messages; the killed one relayed 9 more,
    # which were counted; 1 was in flight when it was killed.
    records = whole_stream(relays=[relay(0, forwarded={"ng-a": 3, "ng-b": 3}, complete=False), relay(1)],
                           groups=[nodegroup("ng-a", [8, 8]), nodegroup("ng-b", [7, 8])],
                           scan_file=file([15, 16], OUTCOME_INCOMPLETE))
    result = account(records_of(records, SCAN))
    assert result.receivers[0].reasons == ["1 sent but not relayed (not in aggregator thread 0's record: in flight "
                                           "when it stopped or restarted, or the scan closed unfinished there)"]
    assert result.missing == 1


def test_a_complete_relay_record_of_fewer_than_were_sent_is_another_run_never_a_stop() -> None:
    # A stray native message of the scan number opened a run at relay thread 0 that completed with
    # one message; its record stands where the real run's would be. The aggregator never stopped.
    records = whole_stream(relays=[relay(0, forwarded={"ng-a": 1, "ng-b": 0}, complete=True), relay(1)],
                           groups=[nodegroup("ng-a", [8, 8]), nodegroup("ng-b", [7, 8])],
                           scan_file=file([15, 16], OUTCOME_INCOMPLETE))
    result = account(records_of(records, SCAN))
    reasons = " ".join(result.receivers[0].reasons)
    assert "stopped" not in reasons, reasons
    assert "aggregator thread 0's record is of another run of the scan number" in reasons, reasons


def test_while_a_scan_runs_its_unsent_and_uncounted_sectors_are_pending_not_missing() -> None:
    # Receiver 0 sent 10 of 16 so far; receiver 1 is done sending; no file yet.
    records = whole_stream(producers=[producer(0, state=STATE_STREAMING, sent=10), producer(1)], relays=[],
                           groups=[], scan_file=None)
    result = account(records_of(records, SCAN))
    assert (result.outcome, result.counted, result.spilled, result.missing, result.pending) == (PENDING, 0, 0, 0, 32)
    assert (result.sent, [r.moved for r in result.receivers]) == (26, [10, 16])
    assert result.line() == "scan 7: pending: 0 counted + 0 spilled + 0 missing + 32 pending = 32 sectors"
    assert all(not r.reasons for r in result.receivers)


def test_while_a_scan_runs_what_is_certainly_lost_is_missing_already_and_says_where() -> None:
    records = whole_stream(
        producers=[producer(0, state=STATE_STREAMING, lost_upstream=2, sent=6),
                   producer(1, state=STATE_ERROR, sent=9, error="stopped")],
        relays=[relay(0, forwarded={"ng-a": 3, "ng-b": 0}, lost={"ng-b": 3}, dead=["ng-b"], complete=False)],
        groups=[], scan_file=None)
    result = account(records_of(records, SCAN))
    assert result.outcome == PENDING
    assert result.receivers[0].reasons == ["2 never reached the producer",
                                           "3 dropped at the aggregator: NodeGroup ng-b declared dead"]
    assert result.receivers[1].reasons == ["7 not sent by thread 0: stopped"]
    assert (result.missing, result.pending) == (12, 20)
    assert result.counted + result.spilled + result.missing + result.pending == result.sectors
    # A thread whose daemon died mid-scan will send no more: what it had not sent is missing.
    gone = account(records_of(records, SCAN), producers_gone={(0, 0)})
    assert gone.receivers[0].reasons == ["2 never reached the producer", "8 not sent by thread 0, which died mid-scan",
                                         "3 dropped at the aggregator: NodeGroup ng-b declared dead"]
    assert gone.receivers[0].pending == 3  # sent, forwarded, not yet in the file


def test_a_scan_is_pending_until_its_producers_end_and_its_file_comes() -> None:
    assert account(records_of(whole_stream(producers=[producer(0), producer(1, state=STATE_STREAMING)]),
                              SCAN)).outcome == PENDING
    assert account(records_of(whole_stream(scan_file=None), SCAN)).outcome == PENDING
    assert account(records_of({}, SCAN)).outcome == PENDING


def test_a_pending_scan_whose_records_the_kvstore_refused_says_kvstore_full_not_pending() -> None:
    server = ServiceStatus(state="idle", scan=0, messages=0, bytes=0, updated_s=0.0,
                           extra={"refused_full": 9, "refused_stack": 3})
    full = kvstore_full(server.encode())
    assert full.startswith("3 of the stack's records refused")
    result = account(records_of(whole_stream(scan_file=None), SCAN), full=full)
    assert result.outcome == PENDING and result.exit_code == 1
    assert result.line().startswith(f"scan {SCAN}: kvstore full: 3 of the stack's records refused")
    assert ": pending:" not in result.line()
    # A flood refused outside the stack's room leaves the account as it was; so does a finished scan.
    quiet = ServiceStatus(state="idle", scan=0, messages=0, bytes=0, updated_s=0.0, extra={"refused_full": 9})
    assert kvstore_full(quiet.encode()) == "" and kvstore_full(None) == ""
    assert account(records_of(whole_stream(), SCAN), full=full).line().startswith(f"scan {SCAN}: complete")


def test_no_file_and_the_nodegroups_gone_is_failed() -> None:
    result = account(records_of(whole_stream(scan_file=None), SCAN), nodegroups_gone=True)
    assert (result.outcome, result.exit_code, result.counted, result.missing) == (FAILED, 1, 0, 32)
    result = account(records_of(whole_stream(scan_file=file([0, 0], OUTCOME_FAILED, "disk full")), SCAN))
    assert (result.outcome, result.notes) == (FAILED, ["file: failed: disk full"])


def test_a_record_that_does_not_decode_is_set_aside() -> None:
    records = whole_stream()
    records[scan_relay_key(SCAN, 0)] = b"\x01"
    records[f"scans/{SCAN:010d}/elsewhere"] = b"\xc0"
    parsed = records_of(records, SCAN)
    assert sorted(parsed.rejected) == [scan_relay_key(SCAN, 0), f"scans/{SCAN:010d}/elsewhere"]
    assert account(parsed).outcome == COMPLETE  # the counted file says so; the relay explains only missing ones


@pytest.mark.parametrize("spilled_scan", [False, True])
def test_status_lists_the_recent_scans_with_their_outcome(spilled_scan: bool) -> None:
    records = whole_stream() if not spilled_scan else entries(
        request(routing=[]), [producer(r, routing=[], counts={}, sent=0, spilled=POSITIONS) for r in (0, 1)])
    assert scans_in(records) == [SCAN]
    text = render(records, 200.0, "title")
    assert "OUTCOME" in text and "COUNTED  SPILLED  ON DISK  PENDING  MISSING  FILE" in text
    row = [line for line in text.splitlines() if line.startswith("7 ")]
    expected = (["7", "4", "x", "4", "on", "disk,", "not", "counted", "0", "0", "32", "0", "0", "-"] if spilled_scan
                else ["7", "4", "x", "4", "complete", "32", "0", "0", "0", "0", "/data/FOURD_0000000007_counted.h5"])
    assert row[0].split() == expected
    replay = [line for line in text.splitlines() if "count it with" in line]
    assert replay == (["scan 7: on disk, not counted; count it with: sectorflow acquire --scan-number 7 --scan-shape "
                       "4x4 --replay --wait"] if spilled_scan else [])


def bridge(last_scan: int, served: bool, empty: int = 0) -> ServiceStatus:
    return ServiceStatus(state="idle", scan=last_scan, updated_s=1.0,
                         extra={"last_scan": last_scan, "last_scan_served": served, "last_scan_positions": 16,
                                "last_scan_empty": empty, "client_connected": served})


def test_the_account_says_how_many_positions_a_bridge_that_served_the_scan_sent_libertem_empty() -> None:
    statuses = {("libertem", "beamline-pc"): bridge(SCAN, True, empty=3), ("libertem", "other"): bridge(SCAN - 1, True),
                ("nodegroup", "ng-a"): ServiceStatus(state="idle", extra={"last_scan": SCAN})}
    assert libertem_notes(statuses, SCAN) == [
        "LiberTEM (bridge beamline-pc): 3 of 16 positions sent empty (never came in time)"]
    assert libertem_notes({("libertem", "b"): bridge(SCAN, False)}, SCAN) == [
        "LiberTEM (bridge b): not served (no client at its start, or the client went or was too slow)"]
    assert libertem_notes(statuses, SCAN + 1) == []
    records = whole_stream() | {status_key("libertem", "beamline-pc"): bridge(SCAN, True, empty=3).encode()}
    assert "scan 7: LiberTEM (bridge beamline-pc): 3 of 16 positions sent empty (never came in time)" in \
        render(records, 2.0, "title").splitlines()


def test_a_producer_that_died_mid_scan_ends_its_part_where_its_record_stopped() -> None:
    records = records_of(whole_stream(producers=[producer(0), producer(1, state=STATE_STREAMING, sent=0)],
                                      scan_file=file([16, 9], OUTCOME_INCOMPLETE)), SCAN)
    assert account(records).outcome == PENDING
    result = account(records, producers_gone={(1, 0)})
    assert (result.outcome, result.missing) == (INCOMPLETE, 7)
    assert result.receivers[1].reasons[0] == ("producer thread 0 died mid-scan: what it sent after its last record "
                                              "is not known")


def test_a_producer_killed_mid_scan_leaves_its_sectors_unsent_not_lost_at_the_aggregator() -> None:
    # As the fault suite saw it: thread 0 of receiver 1 killed; its last record said 3 sent, the
    # NodeGroups counted 9 of it, and its relay thread wrote no record (the scan never ended there).
    records = records_of(whole_stream(producers=[producer(0), producer(1, state=STATE_STREAMING, sent=3)],
                                      relays=[relay(0)], scan_file=file([16, 9], OUTCOME_INCOMPLETE)), SCAN)
    result = account(records, producers_gone={(1, 0)})
    assert (result.outcome, result.counted, result.missing) == (INCOMPLETE, 25, 7)
    assert result.receivers[1].reasons[1:] == ["7 not sent by thread 0, which died mid-scan"]
    # Without a death, what was sent and not counted is placed where the records stop: no relay record.
    alive = account(records_of(whole_stream(producers=[producer(0), producer(1, sent=12, owned=12, state=STATE_FINISHED)],
                                            relays=[relay(0)], scan_file=file([16, 9], OUTCOME_INCOMPLETE)), SCAN))
    assert "3 sent, not counted, no record from aggregator thread 1" in alive.receivers[1].reasons


def test_an_aborted_scan_says_aborted_exits_4_and_places_what_was_not_sent() -> None:
    # Both receivers' threads stopped after 5 of their 16 sectors; the NodeGroups counted those.
    why = "scan 7, frame 5, sector 0: the scan was aborted (sectorflow abort)"
    records = whole_stream(
        producers=[producer(r, state=STATE_ERROR, sent=5, error=why) for r in (0, 1)],
        relays=[relay(r, forwarded={"ng-a": 3, "ng-b": 2}, complete=False) for r in (0, 1)],
        groups=[nodegroup("ng-a", [3, 3], timed_out=True), nodegroup("ng-b", [2, 2], timed_out=True)],
        scan_file=file([5, 5], OUTCOME_INCOMPLETE, "11 of 16 positions missing; aborted by the operator"))
    records[abort_key(SCAN)] = ScanAbort("host:12", 104.0).encode()
    result = account(records_of(records, SCAN))
    assert (result.outcome, result.exit_code) == (ABORTED, 4)
    assert (result.counted, result.spilled, result.missing, result.sectors) == (10, 0, 22, 32)
    assert result.line().startswith("scan 7: aborted: 10 counted + 0 spilled + 22 missing = 32 sectors")
    assert f"11 not sent by thread 0: {why}" in result.breakdown()[0]
    assert "  aborted by host:12 (sectorflow abort)" in result.breakdown()


def test_an_abort_before_anything_was_sent_ends_the_scan_without_a_file() -> None:
    why = "scan 7 was aborted (sectorflow abort) before it began"
    records = entries(request(), [producer(r, state=STATE_ERROR, sent=0, error=why) for r in (0, 1)])
    assert account(records_of(records, SCAN)).outcome == PENDING  # not aborted: the file may come
    records[abort_key(SCAN)] = ScanAbort("host:12", 104.0).encode()
    result = account(records_of(records, SCAN))
    assert (result.outcome, result.counted, result.missing) == (ABORTED, 0, 32)


def test_an_abort_that_came_after_every_sector_was_counted_changes_nothing() -> None:
    records = whole_stream()
    records[abort_key(SCAN)] = ScanAbort("host:12", 104.0).encode()
    assert account(records_of(records, SCAN)).outcome == COMPLETE


@pytest.mark.parametrize("raw, why", [
    (b"\xc1", "not one msgpack object"),
    (msgpack.packb([1]), "expected a map"),
    (msgpack.packb({"version": 2, "by": "h:1", "requested_s": 1.0}), "version 2"),
    (msgpack.packb({"version": 1, "by": 7, "requested_s": 1.0}), "field 'by'"),
    (msgpack.packb({"version": 1, "by": "x" * 300, "requested_s": 1.0}), "1 to 256 bytes"),
    (msgpack.packb({"version": 1, "by": "h:1", "requested_s": True}), "field 'requested_s'"),
])
def test_an_abort_or_claim_that_does_not_decode_is_set_aside(raw: bytes, why: str) -> None:
    records = whole_stream()
    records[abort_key(SCAN)] = raw
    records[claim_key(SCAN)] = raw  # no claimant either
    parsed = records_of(records, SCAN)
    assert parsed.abort is None and why in parsed.rejected[abort_key(SCAN)]
    assert parsed.claim is None and claim_key(SCAN) in parsed.rejected
    assert account(parsed).outcome == COMPLETE


def test_every_nodegroup_of_a_killed_job_that_wrote_no_record_is_named_with_what_it_was_forwarded() -> None:
    records = records_of(whole_stream(relays=[relay(0, forwarded={"ng-a": 8, "ng-b": 6}, lost={"ng-a": 1, "ng-b": 1},
                                                    dead=["ng-a", "ng-b"]), relay(1)],
                                      groups=[], scan_file=None), SCAN)
    result = account(records, nodegroups_gone=True)
    assert result.receivers[0].reasons == ["1 dropped at the aggregator: NodeGroup ng-a declared dead",
                                           "1 dropped at the aggregator: NodeGroup ng-b declared dead",
                                           "8 forwarded to NodeGroup ng-a, which wrote no record",
                                           "6 forwarded to NodeGroup ng-b, which wrote no record"]


def test_a_port_that_heard_a_second_run_is_named_in_a_note_with_each_runs_count() -> None:
    # A stray's run (one sector) came before relay thread 0's real run to ng-a's port 0: the
    # NodeGroup counted them apart and its record lists both; the account names which is the relay's.
    runs = [PortRun(port=0, run=0x12345678, expected=1, received=1),
            PortRun(port=0, run=0x9ABCDEF0, expected=8, received=8),
            PortRun(port=1, run=0x0BADCAFE, expected=8, received=8)]
    stray = nodegroup("ng-a", [9, 8], expected=[9, 8], duplicates=1, runs=runs)
    result = account(records_of(whole_stream(relays=[relay(0, run=0x9ABCDEF0), relay(1, run=0x0BADCAFE)],
                                             groups=[stray, nodegroup("ng-b", [8, 8])]), SCAN))
    assert result.notes == [
        "NodeGroup ng-a: 0 late, 1 duplicate sectors dropped",
        "NodeGroup ng-a, port 0: 2 runs of this scan, each counted apart: run 12345678: 1 received of 1; "
        "run 9abcdef0 (the relay's): 8 received of 8",
    ]
    assert (result.outcome, result.counted, result.missing) == (COMPLETE, 32, 0)


def test_a_run_that_names_none_and_sent_no_count_is_described_as_such() -> None:
    runs = [PortRun(port=1, run=0, expected=-1, received=2), PortRun(port=1, run=0x0BADCAFE, expected=8, received=8)]
    result = account(records_of(whole_stream(relays=[relay(0), relay(1, run=0x0BADCAFE)],
                                             groups=[nodegroup("ng-a", [8, 10], runs=runs),
                                                     nodegroup("ng-b", [8, 8])]), SCAN))
    assert result.notes == [
        "NodeGroup ng-a, port 1: 2 runs of this scan, each counted apart: run 0 (a sender that names no run): "
        "2 received, no count came; run 0badcafe (the relay's): 8 received of 8",
    ]


def test_a_producer_thread_no_daemon_works_on_ends_its_part_where_its_record_stopped() -> None:
    # Receiver 1's daemon died after 3 sectors; the file came. `status` and the dashboard
    # have no watch over time: a thread is gone when its record stood still and its status is gone
    # or names another scan (a daemon started since never takes up the scan).
    stopped = producer(1, state=STATE_STREAMING, sent=3, updated_s=101.0)
    records = records_of(whole_stream(producers=[producer(0), stopped], relays=[relay(0)],
                                      scan_file=file([16, 9], OUTCOME_INCOMPLETE)), SCAN)
    live = ServiceStatus(state=STATE_STREAMING, scan=SCAN)
    assert abandoned_producers(records, {"r0t0": live, "r1t0": live}, now_s=200.0) == set()
    assert abandoned_producers(records, {"r0t0": live}, now_s=101.5) == set(), "a status a moment behind its record"
    assert abandoned_producers(records, {"r0t0": live}, now_s=200.0) == {(1, 0)}
    restarted = ServiceStatus(state="idle", scan=0)
    assert abandoned_producers(records, {"r0t0": live, "r1t0": restarted}, now_s=200.0) == {(1, 0)}
    assert abandoned_producers(records, {"r0t0": live}, now_s=200.0, absent=set()) == set(), "acquire's watch decides"
    result = account(records, producers_gone={(1, 0)})
    assert (result.outcome, result.died) == (INCOMPLETE, ["r1t0"])
    assert result.died_line() == "scan 7: producer r1t0 died mid-scan: its unsent sectors are missing"
    text = render(whole_stream(producers=[producer(0), stopped], relays=[relay(0)],
                               scan_file=file([16, 9], OUTCOME_INCOMPLETE)), 200.0, "title")
    row = next(line for line in text.splitlines() if line.startswith("7 "))
    assert row.split()[4:7] == ["incomplete", "25", "0"], text
    assert "scan 7: producer r1t0 died mid-scan: its unsent sectors are missing" in text.splitlines()


def test_a_thread_that_never_took_the_request_is_gone_only_when_no_idle_daemon_would_take_it() -> None:
    records = records_of(whole_stream(producers=[producer(0)], scan_file=file([16, 0], OUTCOME_INCOMPLETE)), SCAN)
    busy = ServiceStatus(state=STATE_STREAMING, scan=SCAN - 1)  # takes the request once idle
    assert abandoned_producers(records, {"r1t0": busy}, now_s=200.0) == set()
    assert abandoned_producers(records, {"r1t0": ServiceStatus(state="idle", scan=0)}, now_s=200.0) == {(1, 0)}
    assert abandoned_producers(records, {}, now_s=200.0) == {(1, 0)}
    assert account(records, producers_gone={(1, 0)}).died == ["r1t0"]
