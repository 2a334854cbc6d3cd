"""A folded scan's summary (protocol/scan_summary.py, kvstore/SPEC.md "Folding") read by ``records_of``
exactly as the parts it holds: the same records, the same account; a key written after the fold
replaces the folded part; a summary that does not decode is reported, not trusted."""

from __future__ import annotations

import msgpack

from sectorflow.operations.scan_account import INCOMPLETE, PENDING, account, records_of
from sectorflow.protocol import (
    STATE_FINISHED,
    ProducerScanRecord,
    ScanFileRecord,
    ScanRequestRecord,
    scan_file_key,
    scan_prefix,
    scan_producer_key,
    scan_request_key,
)
from sectorflow.protocol.scan_summary import decode_parts, encode, summary_key

SCAN = 12


def parts(counted: int = 14) -> dict[str, bytes]:
    request = ScanRequestRecord(scan_number=SCAN, scan_x=4, scan_y=4, source="simulator", routing=["ng-a"],
                                producer_threads=[1], requested_s=100.0)
    producer = ProducerScanRecord(receiver=0, thread=0, state=STATE_FINISHED, routing=["ng-a"], counts={"ng-a": 16},
                                  owned=16, lost_upstream=2, sent=14, spilled=0, spill_file="", partial=False,
                                  error="", updated_s=101.0)
    file = ScanFileRecord(outcome="incomplete", path="/data/scan.h5", extra_paths=[], positions=16,
                          frames_written=counted, positions_missing=16 - counted, sectors_counted=[counted],
                          reason="positions missing", written_s=103.0)
    return {scan_request_key(SCAN): request.encode(), scan_producer_key(SCAN, 0, 0): producer.encode(),
            scan_file_key(SCAN): file.encode()}


def folded(keys: dict[str, bytes]) -> dict[str, bytes]:
    prefix = scan_prefix(SCAN)
    return {summary_key(SCAN): encode({key[len(prefix):]: raw for key, raw in keys.items()}, 104.0)}


def test_a_summary_gives_the_records_and_the_account_of_its_parts() -> None:
    from_parts, from_summary = account(records_of(parts(), SCAN)), account(records_of(folded(parts()), SCAN))
    assert from_summary.outcome == from_parts.outcome == INCOMPLETE
    assert from_summary.line() == from_parts.line()
    assert from_summary.breakdown() == from_parts.breakdown()
    assert "2 never reached the producer" in "\n".join(from_summary.breakdown())


def test_a_key_written_after_the_fold_replaces_the_folded_part() -> None:
    entries = folded(parts(counted=14)) | {scan_file_key(SCAN): parts(counted=16)[scan_file_key(SCAN)]}
    records = records_of(entries, SCAN)
    assert records.file is not None and records.file.frames_written == 16


def test_a_summary_that_does_not_decode_is_reported_and_leaves_the_scan_pending() -> None:
    entries = {summary_key(SCAN): msgpack.packb({"version": 1, "parts": {"request": "not bytes"}})}
    records = records_of(entries, SCAN)
    assert "expected a map of part names to bytes" in records.rejected[summary_key(SCAN)]
    assert account(records).outcome == PENDING
    assert decode_parts(folded(parts())[summary_key(SCAN)]).keys() == {"request", "producer/r0t0", "file"}
