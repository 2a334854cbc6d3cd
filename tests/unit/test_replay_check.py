"""Which replays acquire refuses, and the hint of a used scan number, from a scan's records and the raw
files on this host (tests/faults/test_replay_refusal.py refuses them on a running stack)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sectorflow.operations.acquire import used_number_refusal
from sectorflow.operations.replay_check import counted_already_by, raw_files_known, replay_refusal
from sectorflow.operations.scan_account import ScanRecords
from sectorflow.protocol import (
    OUTCOME_COMPLETE,
    OUTCOME_INCOMPLETE,
    STATE_FINISHED,
    NodeGroupScanRecord,
    ProducerScanRecord,
    ScanFileRecord,
    ScanRequestRecord,
    raw_file_name,
)

SCAN = 7
PATH = "/data/FOURD_0000000007_counted.h5"


def producer(receiver: int, sent: int = 16, spilled: int = 0) -> ProducerScanRecord:
    return ProducerScanRecord(receiver=receiver, thread=0, state=STATE_FINISHED, routing=["ng-a"],
                              counts={"ng-a": sent}, owned=16, lost_upstream=0, sent=sent, spilled=spilled,
                              spill_file="/raw/x.data" if spilled else "", partial=False, error="", updated_s=101.0)


def scan(source: str = "simulator", outcome: str | None = OUTCOME_COMPLETE, **producer_fields: Any) -> ScanRecords:
    """Scan 7 of two receivers, streamed to ng-a (producer_fields: each producer's sent and spilled)."""
    records = ScanRecords(SCAN)
    records.request = ScanRequestRecord(scan_number=SCAN, scan_x=4, scan_y=4, source=source, routing=["ng-a"],
                                        producer_threads=[1, 1], requested_s=100.0)
    records.producers = {(r, 0): producer(r, **producer_fields) for r in (0, 1)}
    records.nodegroups = {"ng-a": NodeGroupScanRecord(
        uid="ng-a", expected=[16, 16], received=[16, 16], frames_complete=16, frames_incomplete=0,
        sectors_counted=32, late=0, duplicates=0, timed_out=False, updated_s=102.0)}
    if outcome is not None:
        records.file = ScanFileRecord(outcome=outcome, path=PATH, extra_paths=[], positions=16, frames_written=16,
                                      positions_missing=0, sectors_counted=[16, 16], reason="", written_s=103.0)
    return records


def test_a_scan_counted_complete_is_not_replayed_and_its_hint_names_no_replay(tmp_path: Path) -> None:
    counted = scan()
    assert replay_refusal(counted, str(tmp_path)) == (
        f"scan 7 was counted complete into {PATH}: nothing to replay (--replay streams the raw files of a scan that "
        "was spilled or written to disk)")
    assert used_number_refusal(counted, 8, str(tmp_path)) == (
        f"scan 7 was acquired before (outcome complete: {PATH}): a scan number is used once; the next unused is 8")
    # Even with raw files beside it: a complete file has nothing left for them to add.
    (tmp_path / raw_file_name(SCAN, 0)).write_bytes(b"")
    assert replay_refusal(counted, str(tmp_path)) is not None
    assert "--replay" not in used_number_refusal(counted, 8, str(tmp_path))


def test_a_scan_with_no_raw_file_known_is_not_replayed_and_its_hint_names_no_replay(tmp_path: Path) -> None:
    incomplete = scan(outcome=OUTCOME_INCOMPLETE, sent=12)  # sectors missing, none spilled
    refusal = (f"scan 7 has no raw files to replay: no producer record of it says a receiver spilled or wrote it to "
               f"disk, and {tmp_path} ([producer] fallback_dir) on this host holds none")
    assert replay_refusal(incomplete, str(tmp_path)) == refusal
    assert used_number_refusal(incomplete, 8, str(tmp_path)).endswith("a scan number is used once; the next unused is 8")
    # A scan number nobody used, and a fallback directory that does not exist: nothing anywhere.
    assert replay_refusal(ScanRecords(SCAN), str(tmp_path / "absent")) == refusal.replace(
        str(tmp_path), str(tmp_path / "absent"))
    # A running scan with no file yet, none spilled: no replay either.
    assert "--replay" not in used_number_refusal(scan(outcome=None), 8, str(tmp_path))


def test_a_scan_whose_producers_spilled_is_replayed_and_its_hint_says_so(tmp_path: Path) -> None:
    spilled = scan(outcome=OUTCOME_INCOMPLETE, sent=10, spilled=6)
    assert raw_files_known(spilled, str(tmp_path)) and replay_refusal(spilled, str(tmp_path)) is None
    assert used_number_refusal(spilled, 8, str(tmp_path)) == (
        f"scan 7 was acquired before (outcome incomplete: {PATH}): a scan number is used once; the next unused is 8, "
        "and --replay streams scan 7's raw files again")


def test_raw_files_are_known_from_an_earlier_replay_or_from_this_hosts_fallback_directory(tmp_path: Path) -> None:
    # A replay overwrote the producers' records: what they sent came from raw files, which stay.
    assert raw_files_known(scan(source="replay", outcome=OUTCOME_INCOMPLETE, sent=4), str(tmp_path))
    assert not raw_files_known(scan(source="replay", outcome=OUTCOME_INCOMPLETE, sent=0), str(tmp_path))
    # Records gone (expired): a receiver of this host's raw files, a .partial one too, count.
    (tmp_path / f"{raw_file_name(SCAN, 1)}.partial").write_bytes(b"")
    assert raw_files_known(ScanRecords(SCAN), str(tmp_path))
    assert not raw_files_known(ScanRecords(SCAN + 1), str(tmp_path))


def test_nodegroups_that_counted_the_scan_are_named() -> None:
    assert counted_already_by(scan(), ["ng-b", "ng-a"]) == ["ng-a"]
    assert counted_already_by(scan(), ["ng-b"]) == []
