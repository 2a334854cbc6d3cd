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


def test_a_tier_s_records_carry_each_member_s_part_and_one_aggregator_s_read_as_before() -> None:
    # One aggregator: no "aggregators", no "tier_counts" on the wire (the golden bytes above), and
    # member 0's part is the whole.
    golden = ProducerScanRecord.decode((DATA / "scan_producer_v1.msgpack").read_bytes())
    assert golden.tier_counts == [] and golden.counts_for(0) == golden.counts and golden.counts_for(1) is None
    assert ScanRequestRecord.decode((DATA / "scan_request_v1.msgpack").read_bytes()).tier == []
    # Three members, two NodeGroups: member-major, routing order within a member.
    part = ProducerScanRecord(receiver=1, thread=0, state="streaming", routing=["ng-a", "ng-b"],
                              counts={"ng-a": 6, "ng-b": 5}, owned=11, lost_upstream=0, sent=0, spilled=0,
                              spill_file="", partial=False, error="", updated_s=1.0)
    part.tier_counts = [2, 2, 2, 2, 2, 1]
    part.sent = 5
    assert [part.sent_to(m) for m in range(2)] == [5, 0]  # no tier_sent: all of sent is member 0's
    part.sent, part.tier_sent = 7, [4, 0, 3]
    again = ProducerScanRecord.decode(part.encode())
    assert again == part
    assert [again.sent_to(m) for m in range(4)] == [4, 0, 3, 0]
    assert [again.counts_for(m) for m in range(4)] == [{"ng-a": 2, "ng-b": 2}, {"ng-a": 2, "ng-b": 2},
                                                       {"ng-a": 2, "ng-b": 1}, None]
    fields = msgpack.unpackb(part.encode()) | {"tier_counts": [1, 2, 3]}
    with pytest.raises(ProtocolError, match="not a multiple of the 2 routing entries"):
        ProducerScanRecord.decode(msgpack.packb(fields))
    request = ScanRequestRecord(scan_number=1, scan_x=4, scan_y=4, source="simulator", routing=["ng-a"],
                                producer_threads=[1, 1, 1, 1], requested_s=1.0)
    assert request.carried_by(0) and not request.carried_by(1)  # no tier: one aggregator, member 0
    request.tier = [0, 2, 4]
    again = ScanRequestRecord.decode(request.encode())
    assert again.tier == [0, 2, 4] and again.carried_by(2) and not again.carried_by(1)
    for bad in ([2, 0], [1, 1], [16]):
        request.tier = bad
        with pytest.raises(ProtocolError, match="ascending, without duplicates, below 16"):
            request.encode()
