"""The scan records (protocol/scan_records.hpp) from Python: golden bytes packed by the ``msgpack``
package decode to the values they hold, and every record round-trips through the C++ codec."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from sectorflow.protocol import (
    OUTCOME_INCOMPLETE,
    NodeGroupScanRecord,
    ProducerScanRecord,
    ProtocolError,
    RelayScanRecord,
    ScanFileRecord,
    ScanRequestRecord,
    parse_scan_key,
    scan_file_key,
    scan_prefix,
    scan_producer_key,
)

DATA = Path(__file__).resolve().parents[1] / "data"


def test_keys_sort_by_scan() -> None:
    assert scan_prefix(7) == "scans/0000000007/"
    assert scan_producer_key(7, 2, 1) == "scans/0000000007/producer/r2t1"
    assert sorted([scan_file_key(10), scan_file_key(9)]) == [scan_file_key(9), scan_file_key(10)]
    assert parse_scan_key(scan_file_key(4294967295)) == 4294967295


@pytest.mark.parametrize(("cls", "name"), [
    (ScanRequestRecord, "scan_request_v1.msgpack"),
    (ProducerScanRecord, "scan_producer_v1.msgpack"),
    (RelayScanRecord, "scan_relay_v1.msgpack"),
    (NodeGroupScanRecord, "scan_nodegroup_v1.msgpack"),
    (NodeGroupScanRecord, "scan_nodegroup_v1_runs.msgpack"),
    (ScanFileRecord, "scan_file_v1.msgpack"),
])
def test_golden_records_decode_to_their_values_and_encode_back(cls, name: str) -> None:
    golden = (DATA / name).read_bytes()
    record = cls.decode(golden)
    fields = msgpack.unpackb(golden)
    for key, value in fields.items():
        if key == "runs":  # rows of [port, run, expected, received]
            assert [[r.port, r.run, r.expected, r.received] for r in record.runs] == value
        elif key != "version":
            assert getattr(record, key) == value, key
    assert record.encode() == golden


def test_a_file_record_sums_what_it_counted_and_a_request_knows_its_sectors() -> None:
    file = ScanFileRecord(outcome=OUTCOME_INCOMPLETE, path="/f.h5", extra_paths=[], positions=16, frames_written=16,
                          positions_missing=0, sectors_counted=[16, 16, 15, 16], reason="1 sector lost", written_s=1.0)
    assert ScanFileRecord.decode(file.encode()).total_counted == 63
    request = ScanRequestRecord(scan_number=1, scan_x=4, scan_y=4, source="simulator", routing=[],
                                producer_threads=[1, 1, 1, 1], requested_s=1.0)
    assert request.sectors == 64


def test_a_producer_record_says_what_it_could_not_account_for() -> None:
    stopped = ProducerScanRecord(receiver=0, thread=0, state="error", routing=["ng-a"], counts={"ng-a": 100},
                                 owned=100, lost_upstream=2, sent=60, spilled=0, spill_file="", partial=False,
                                 error="stopped", updated_s=1.0)
    assert stopped.unaccounted == 38


def test_an_unknown_outcome_or_state_does_not_decode() -> None:
    fields = msgpack.unpackb((DATA / "scan_file_v1.msgpack").read_bytes()) | {"outcome": "great"}
    with pytest.raises(ProtocolError, match="'great' is not complete, incomplete or failed"):
        ScanFileRecord.decode(msgpack.packb(fields))
    fields = msgpack.unpackb((DATA / "scan_producer_v1.msgpack").read_bytes()) | {"state": "done"}
    with pytest.raises(ProtocolError, match="'done' is not a service state"):
        ProducerScanRecord.decode(msgpack.packb(fields))
