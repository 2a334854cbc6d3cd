"""The kvstore records (protocol/records.hpp): keys, and the records every component decodes in C++.

Golden records in tests/data/*_v1.msgpack were packed by the ``msgpack`` package from plain
dicts, so these tests check the C++ codecs against an independent implementation.
"""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from sectorflow.protocol import (
    ACQUIRE_REQUEST_KEY,
    MAX_EXTRA_FIELDS,
    MAX_NAME_BYTES,
    MAX_PORTS,
    MAX_ROUTING_LENGTH,
    MAX_SCAN_SIDE,
    MAX_TEXT_BYTES,
    MAX_UID_BYTES,
    NODEGROUPS_PREFIX,
    SCHEMA_VERSION,
    AcquireRequest,
    BadEntries,
    NodeGroupRecord,
    ProtocolError,
    ServiceStatus,
    nodegroup_key,
    nodegroups_from,
    parse_nodegroup_key,
    parse_status_key,
    status_key,
    status_prefix,
)

DATA = Path(__file__).resolve().parents[1] / "data"

GOLDEN_NODEGROUP = NodeGroupRecord(
    uid="ng-0001", host="10.0.0.7", ports=[6200, 6201, 6202, 6203], node="nid001234", rank=3, status="idle"
)


def packed(**fields: object) -> bytes:
    return msgpack.packb({"version": SCHEMA_VERSION, **fields})


def test_keys_are_built_and_parsed() -> None:
    assert nodegroup_key("ng-1") == "nodegroups/ng-1" and NODEGROUPS_PREFIX == "nodegroups/"
    assert status_key("producer", "r0t1") == "status/producer/r0t1"
    assert status_prefix("aggregator") == "status/aggregator/" and status_prefix() == "status/"
    assert parse_status_key("status/nodegroup/ng-1") == ("nodegroup", "ng-1")
    assert parse_nodegroup_key("nodegroups/ng-1") == "ng-1"
    assert ACQUIRE_REQUEST_KEY == "acquire/request"


@pytest.mark.parametrize("bad", ["", "a/b"])
def test_key_parts_must_be_non_empty_without_slash(bad: str) -> None:
    with pytest.raises(ProtocolError, match=f"'{bad}' must be non-empty and hold no '/'"):
        status_key("producer", bad)
    with pytest.raises(ProtocolError, match="must be non-empty and hold no '/'"):
        nodegroup_key(bad)


def test_other_keys_are_not_status_keys() -> None:
    with pytest.raises(ProtocolError, match=r"'nodegroups/x' is not a status key \(status/<service>/<name>\)"):
        parse_status_key("nodegroups/x")
    with pytest.raises(ProtocolError, match="is not a NodeGroup key"):
        parse_nodegroup_key("status/a/b")


def test_nodegroup_record_matches_the_golden_bytes() -> None:
    golden = (DATA / "nodegroup_record_v1.msgpack").read_bytes()
    assert NodeGroupRecord.decode(golden) == GOLDEN_NODEGROUP
    assert GOLDEN_NODEGROUP.encode() == golden


def test_nodegroup_record_with_its_stack_matches_the_golden_bytes() -> None:
    golden = (DATA / "nodegroup_record_v1_stack.msgpack").read_bytes()
    stacked = NodeGroupRecord.decode(golden)
    assert stacked.stack_id == "0123456789abcdef" and stacked != GOLDEN_NODEGROUP
    stacked.stack_id = ""
    assert stacked == GOLDEN_NODEGROUP and stacked.encode() == (DATA / "nodegroup_record_v1.msgpack").read_bytes()
    with pytest.raises(ProtocolError, match="field 'stack_id': 'ABC' is not a stack id"):
        NodeGroupRecord(uid="ng-1", host="h", ports=[1], stack_id="ABC").encode()


def test_nodegroup_endpoint_per_aggregator_thread() -> None:
    assert GOLDEN_NODEGROUP.endpoint(2) == "tcp://10.0.0.7:6202"
    with pytest.raises(ProtocolError, match="has 4 ports, none for aggregator thread 4"):
        GOLDEN_NODEGROUP.endpoint(4)


def test_nodegroup_decode_names_the_missing_field() -> None:
    value = packed(uid="ng-7", host="h", ports=[1], node="n", rank=0)
    with pytest.raises(ProtocolError, match="NodeGroupRecord 'ng-7': missing field 'status'"):
        NodeGroupRecord.decode(value)


def test_nodegroup_decode_names_a_mistyped_field() -> None:
    value = packed(uid="ng-7", host="h", ports="6200", node="n", rank=0, status="idle")
    expected = "NodeGroupRecord 'ng-7': field 'ports': expected an array of ports, got a string"
    with pytest.raises(ProtocolError, match=expected):
        NodeGroupRecord.decode(value)
    value = packed(uid="ng-7", host="h", ports=[70000], node="n", rank=0, status="idle")
    with pytest.raises(ProtocolError, match="element 0 is not a port from 1 to 65535"):
        NodeGroupRecord.decode(value)


def test_nodegroup_decode_rejects_unknown_fields_and_versions() -> None:
    value = packed(uid="ng-7", host="h", ports=[1], node="n", rank=0, status="idle", prot=[2])
    with pytest.raises(ProtocolError, match="unknown field 'prot'"):
        NodeGroupRecord.decode(value)
    value = msgpack.packb({"version": 99, "uid": "ng-7"})
    with pytest.raises(ProtocolError, match="NodeGroupRecord: version 99, this program reads version 1"):
        NodeGroupRecord.decode(value)


def test_nodegroup_decode_rejects_what_is_not_a_map() -> None:
    with pytest.raises(ProtocolError, match="NodeGroupRecord: expected a msgpack map, got an array"):
        NodeGroupRecord.decode(msgpack.packb([1, 2]))
    with pytest.raises(ProtocolError, match="NodeGroupRecord: not valid msgpack"):
        NodeGroupRecord.decode(b"\xc1")


def test_nodegroups_from_a_subtree_are_sorted_by_uid() -> None:
    records = [NodeGroupRecord(uid=uid, host="h", ports=[6000 + i], status="idle") for i, uid in enumerate("cab")]
    entries = {nodegroup_key(r.uid): r.encode() for r in records}
    listing = nodegroups_from(entries)
    assert [r.uid for r in listing.records] == ["a", "b", "c"]
    assert listing.rejected == {}


def test_nodegroups_from_skips_bad_entries_and_says_why() -> None:
    good = {nodegroup_key(uid): NodeGroupRecord(uid=uid, host="h", ports=[1]).encode() for uid in ("c", "a")}
    bad = {
        "nodegroups/b": NodeGroupRecord(uid="z", host="h", ports=[1]).encode(),  # another uid
        "nodegroups/x": b"\xc1",  # not msgpack
        "nodegroups/y": msgpack.packb({"version": 1, "uid": "y"}),  # valid msgpack, not a record
        "nodegroups/d/e": NodeGroupRecord(uid="e", host="h", ports=[1]).encode(),  # not a NodeGroup key
    }
    listing = nodegroups_from({**good, **bad})
    assert [r.uid for r in listing.records] == ["a", "c"]
    assert listing.rejected == {
        "nodegroups/b": "holds the record of uid 'z'",
        "nodegroups/x": "NodeGroupRecord: not valid msgpack within its bounds (parse error)",
        "nodegroups/y": "NodeGroupRecord 'y': missing field 'host'",
        "nodegroups/d/e": "kvstore key 'nodegroups/d/e' is not a NodeGroup key (nodegroups/<uid>)",
    }


def test_bad_entries_are_reported_once_until_they_change_or_are_fixed() -> None:
    bad = BadEntries()
    assert bad.note("nodegroups/", {"nodegroups/x": "why"}) == {"nodegroups/x": "why"}
    assert bad.note("nodegroups/", {"nodegroups/x": "why"}) == {}, "a second read reports nothing new"
    assert bad.note("status/", {"status/a/b": "no"}) == {"status/a/b": "no"}, "another prefix is its own"
    assert bad.note("nodegroups/", {"nodegroups/x": "other"}) == {"nodegroups/x": "other"}, "a new reason"
    assert bad.note("nodegroups/", {}) == {}  # fixed or deleted: forgotten ...
    assert bad.note("nodegroups/", {"nodegroups/x": "other"}) == {"nodegroups/x": "other"}  # ... so reported again
    assert bad.note("status/", {"status/a/b": "no"}) == {}, "forgetting nodegroups/ kept status/"
    assert bad.count == 4


def test_service_status_matches_the_golden_bytes_with_extra_fields() -> None:
    golden = (DATA / "service_status_v1.msgpack").read_bytes()
    status = ServiceStatus.decode(golden)
    assert (status.state, status.scan, status.messages, status.bytes) == ("streaming", 17, 123456, 20480000000)
    assert status.updated_s == 1767225600.25
    assert status.extra == {"expected": 400, "fallback": False, "note": "r0"}
    assert status.encode() == golden


def test_service_status_float_fields_stay_floats() -> None:
    status = ServiceStatus(state="idle", updated_s=1000.0, extra={"rate": 2.0})
    assert msgpack.unpackb(status.encode()) == {
        "version": 1, "state": "idle", "scan": 0, "messages": 0, "bytes": 0, "updated_s": 1000.0, "rate": 2.0
    }
    assert isinstance(msgpack.unpackb(status.encode())["rate"], float)


def test_service_status_stamps_the_time_when_not_given() -> None:
    decoded = ServiceStatus.decode(ServiceStatus(state="idle").encode())
    assert decoded.updated_s > 1.7e9


def test_service_status_rejects_extra_fields_shadowing_standard_ones() -> None:
    with pytest.raises(ProtocolError, match="extra field 'scan' reuses a standard field name"):
        ServiceStatus(state="idle", extra={"scan": 3}).encode()
    with pytest.raises(ProtocolError, match="empty state"):
        ServiceStatus(state="").encode()


def test_service_status_decode_names_bad_fields() -> None:
    value = packed(state="idle", scan=-1, messages=0, bytes=0, updated_s=0.0)
    expected = "ServiceStatus: field 'scan': expected an unsigned integer, got a negative integer"
    with pytest.raises(ProtocolError, match=expected):
        ServiceStatus.decode(value)
    value = packed(state="idle", scan=1, messages=0, bytes=0, updated_s=0.0, routing=["a"])
    expected = "field 'routing': extra fields hold a bool, integer, float or string, got an array"
    with pytest.raises(ProtocolError, match=expected):
        ServiceStatus.decode(value)


def test_acquire_request_matches_the_golden_bytes() -> None:
    golden = (DATA / "acquire_request_v1.msgpack").read_bytes()
    request = AcquireRequest.decode(golden)
    assert request == AcquireRequest(scan_number=17, scan_x=128, scan_y=64, rate_hz=1000.0)
    assert request.encode() == golden


def test_acquire_request_with_routing_and_source_matches_the_golden_bytes() -> None:
    golden = (DATA / "acquire_request_v1_routing.msgpack").read_bytes()
    request = AcquireRequest.decode(golden)
    assert request == AcquireRequest(
        scan_number=18, scan_x=8, scan_y=4, rate_hz=250.0, routing=["ng-a", "ng-b"], source="replay"
    )
    assert request.encode() == golden


def test_acquire_request_without_routing_or_source_means_replica_and_simulator() -> None:
    request = AcquireRequest.decode(packed(scan_number=1, scan_x=2, scan_y=3, rate_hz=0.0))
    assert request.routing is None and request.source == "simulator"
    empty = AcquireRequest(scan_number=2, scan_x=1, scan_y=1, routing=[])
    assert AcquireRequest.decode(empty.encode()).routing == [], "an empty routing list (fallback) survives"


def test_acquire_request_refuses_bad_routing_and_source() -> None:
    with pytest.raises(ProtocolError, match="AcquireRequest scan 4: routing list is not sorted without duplicates"):
        AcquireRequest(scan_number=4, scan_x=1, scan_y=1, routing=["b", "a"]).encode()
    with pytest.raises(ProtocolError, match="routing uid 'a/b' must be non-empty and hold no '/'"):
        AcquireRequest.decode(packed(scan_number=4, scan_x=1, scan_y=1, rate_hz=0.0, routing=["a/b"]))
    with pytest.raises(ProtocolError, match="source 'disk' is unknown; expected 'simulator' or 'replay'"):
        AcquireRequest.decode(packed(scan_number=4, scan_x=1, scan_y=1, rate_hz=0.0, source="disk"))
    with pytest.raises(ProtocolError, match="field 'routing': expected an array of strings"):
        AcquireRequest.decode(packed(scan_number=4, scan_x=1, scan_y=1, rate_hz=0.0, routing="a"))
    with pytest.raises(ProtocolError, match="rate_hz inf is negative or not finite"):
        AcquireRequest.decode(packed(scan_number=4, scan_x=1, scan_y=1, rate_hz=float("inf")))


def test_acquire_request_validates_the_scan_shape() -> None:
    with pytest.raises(ProtocolError, match="AcquireRequest scan 3: scan shape 0 x 64 is empty"):
        AcquireRequest(scan_number=3, scan_x=0, scan_y=64).encode()
    with pytest.raises(ProtocolError, match="missing field 'rate_hz'"):
        AcquireRequest.decode(packed(scan_number=1, scan_x=1, scan_y=1))


def test_bounds_are_the_documented_ones() -> None:
    assert (MAX_UID_BYTES, MAX_NAME_BYTES, MAX_TEXT_BYTES) == (244, 255, 4096)
    assert (MAX_PORTS, MAX_EXTRA_FIELDS, MAX_ROUTING_LENGTH, MAX_SCAN_SIDE) == (256, 64, 4096, 65535)


def nodegroup_fields(**changes: object) -> dict:
    return {"uid": "ng-7", "host": "h", "ports": [6200], "node": "n", "rank": 0, "status": "idle", **changes}


@pytest.mark.parametrize(("changes", "message"), [
    ({"ports": list(range(1, MAX_PORTS + 2))}, "NodeGroupRecord 'ng-7': field 'ports': 257 ports, expected at most 256"),
    ({"uid": "u" * (MAX_UID_BYTES + 1)}, "field 'uid': 245 bytes, expected at most 244"),
    ({"host": "h" * 256}, "NodeGroupRecord 'ng-7': field 'host': a string of 256 bytes, expected at most 255"),
    ({"node": "n" * 256}, "field 'node': a string of 256 bytes, expected at most 255"),
    ({"status": "s" * 256}, "field 'status': a string of 256 bytes, expected at most 255"),
])
def test_nodegroup_decode_refuses_what_passes_a_bound(changes: dict, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        NodeGroupRecord.decode(packed(**nodegroup_fields(**changes)))


def test_nodegroup_encode_refuses_what_decode_would_refuse() -> None:
    with pytest.raises(ProtocolError, match="field 'ports': 257 ports, expected at most 256 .one per aggregator thread."):
        NodeGroupRecord(uid="ng-7", host="h", ports=[1] * 257).encode()
    with pytest.raises(ProtocolError, match="field 'uid': 245 bytes, expected at most 244"):
        NodeGroupRecord(uid="u" * 245, host="h", ports=[1]).encode()
    longest = NodeGroupRecord(uid="u" * MAX_UID_BYTES, host="h" * MAX_NAME_BYTES, ports=[1] * MAX_PORTS)
    assert NodeGroupRecord.decode(longest.encode()) == longest


def test_a_string_field_that_is_not_utf8_is_refused_not_handed_to_python() -> None:
    value = msgpack.packb({"version": 1, **nodegroup_fields(host=b"")}).replace(b"\xa4host\xc4\x00",
                                                                                b"\xa4host\xa2\xff\xfe")
    with pytest.raises(ProtocolError, match=r"field 'host': '\\xff\\xfe' is not valid UTF-8"):
        NodeGroupRecord.decode(value)
    status = packed(state="idle", scan=0, messages=0, bytes=0, updated_s=0.0, note="x").replace(b"\xa1x", b"\xa1\xff")
    with pytest.raises(ProtocolError, match="field 'note': '.xff' is not valid UTF-8"):
        ServiceStatus.decode(status)


def test_errors_quote_a_peer_text_short_and_escaped() -> None:
    value = packed(**nodegroup_fields(), **{"a" * 10_000 + "\n": 1})
    with pytest.raises(ProtocolError) as raised:
        NodeGroupRecord.decode(value)
    assert f"unknown field '{'a' * 40}...'" in str(raised.value) and len(str(raised.value)) < 200


def status_fields(**changes: object) -> dict:
    return {"state": "idle", "scan": 0, "messages": 0, "bytes": 0, "updated_s": 0.0, **changes}


def test_service_status_bounds_extra_fields_and_their_size() -> None:
    extra = {f"x{i}": i for i in range(MAX_EXTRA_FIELDS + 1)}
    with pytest.raises(ProtocolError, match="ServiceStatus: 65 extra fields, expected at most 64"):
        ServiceStatus.decode(packed(**status_fields(**extra)))
    with pytest.raises(ProtocolError, match="ServiceStatus: 65 extra fields, expected at most 64"):
        ServiceStatus(state="idle", extra=extra).encode()
    with pytest.raises(ProtocolError, match="field 'error': 4097 bytes of text, expected at most 4096"):
        ServiceStatus.decode(packed(**status_fields(error="e" * (MAX_TEXT_BYTES + 1))))
    with pytest.raises(ProtocolError, match="ServiceStatus: field 'state': a string of 256 bytes, expected at most 255"):
        ServiceStatus.decode(packed(**status_fields(state="s" * 256)))
    with pytest.raises(ProtocolError, match="extra field 'nnnn.*': 256 bytes in its name, expected at most 255"):
        ServiceStatus(state="idle", extra={"n" * 256: 1}).encode()


def test_service_status_encode_cuts_a_long_text_where_a_character_ends() -> None:
    # An error message must reach the status, not fail a second time: it is cut to the bound.
    text = "é" * MAX_TEXT_BYTES  # two bytes each: the bound falls on a character boundary
    decoded = ServiceStatus.decode(ServiceStatus(state="error", extra={"error": "x" + text}).encode())
    assert decoded.extra["error"] == "x" + "é" * ((MAX_TEXT_BYTES - 1) // 2)


@pytest.mark.parametrize(("changes", "message"), [
    ({"scan_x": MAX_SCAN_SIDE + 1}, "AcquireRequest scan 4: field 'scan_x': 65536 positions, expected at most 65535"),
    ({"scan_y": 2**32 - 1}, "AcquireRequest scan 4: field 'scan_y': 4294967295 positions, expected at most 65535"),
    ({"routing": [f"ng-{i:05d}" for i in range(MAX_ROUTING_LENGTH + 1)]},
     "field 'routing': 4097 strings, expected at most 4096"),
    ({"routing": ["u" * 245]}, "field 'routing': element 0 is a string of 245 bytes, expected at most 244"),
    ({"source": "s" * 256}, "field 'source': a string of 256 bytes, expected at most 255"),
])
def test_acquire_request_decode_refuses_what_passes_a_bound(changes: dict, message: str) -> None:
    fields = {"scan_number": 4, "scan_x": 2, "scan_y": 2, "rate_hz": 0.0, **changes}
    with pytest.raises(ProtocolError, match=message):
        AcquireRequest.decode(packed(**fields))


def test_acquire_request_encode_refuses_what_decode_would_refuse() -> None:
    with pytest.raises(ProtocolError, match="field 'scan_x': 65536 positions, expected at most 65535"):
        AcquireRequest(scan_number=4, scan_x=65536, scan_y=1).encode()
    with pytest.raises(ProtocolError, match="field 'routing': 4097 NodeGroups, expected at most 4096"):
        AcquireRequest(scan_number=4, scan_x=1, scan_y=1, routing=[f"{i:05d}" for i in range(4097)]).encode()
    with pytest.raises(ProtocolError, match="routing uid 'uuuu.*': 245 bytes, expected at most 244"):
        AcquireRequest(scan_number=4, scan_x=1, scan_y=1, routing=["u" * 245]).encode()
    largest = AcquireRequest(scan_number=4, scan_x=MAX_SCAN_SIDE, scan_y=MAX_SCAN_SIDE)
    assert AcquireRequest.decode(largest.encode()) == largest
