"""The tables of `sectorflow status`, rendered from replica content."""

from __future__ import annotations

from sectorflow.protocol import AcquireRequest, NodeGroupRecord, ServiceStatus, nodegroup_key, status_key
from sectorflow.operations.status_table import render


def test_tables_show_every_service_and_nodegroup() -> None:
    entries = {
        status_key("producer", "r0t1"): ServiceStatus(
            state="streaming", scan=12, messages=3400, bytes=5_600_000, updated_s=990.0, extra={"expected": 4000}
        ).encode(),
        nodegroup_key("ng-1"): NodeGroupRecord(uid="ng-1", host="10.1.2.3", ports=[6200, 6201], node="nid7",
                                               rank=2, status="idle").encode(),
        "acquire/request": AcquireRequest(scan_number=12, scan_x=128, scan_y=128).encode(),
    }
    text = render(entries, now_s=1000.0, title="kvstore tcp://h:1: sequence 9, live")
    lines = text.splitlines()
    assert lines[0] == "kvstore tcp://h:1: sequence 9, live"
    row = next(line for line in lines if line.startswith("producer"))
    assert row.split() == ["producer", "r0t1", "streaming", "12", "3,400", "5.6", "MB", "10.0s", "-"]
    # Each service's further fields under the table, as words, not a column of key=value pairs.
    assert "producer r0t1: expected 4000" in lines
    row = next(line for line in lines if line.startswith("ng-1"))
    assert row.split() == ["ng-1", "10.1.2.3", "6200,6201", "nid7", "2", "idle"]
    assert ("acquire/request: scan 12, 128 x 128 positions, as fast as possible, source simulator, "
            "each producer thread routes by its own replica") in lines


def test_the_request_says_where_the_scan_goes() -> None:
    streamed = AcquireRequest(scan_number=3, scan_x=4, scan_y=2, rate_hz=500.0, routing=["ng-a", "ng-b"])
    to_disk = AcquireRequest(scan_number=4, scan_x=4, scan_y=2, routing=[], source="replay")
    assert render({"acquire/request": streamed.encode()}, 0.0, "t").splitlines()[-1] == (
        "acquire/request: scan 3, 4 x 2 positions, 500 Hz, source simulator, streamed to ng-a, ng-b")
    assert render({"acquire/request": to_disk.encode()}, 0.0, "t").splitlines()[-1] == (
        "acquire/request: scan 4, 4 x 2 positions, as fast as possible, source replay, no NodeGroup: raw files to disk")


def test_refused_messages_show_with_their_kinds_and_stay_out_of_extra() -> None:
    extra = {"malformed": 5, "malformed_header": 2, "malformed_no_info": 3, "malformed_parts": 0, "lost": 0}
    entries = {status_key("aggregator", "t1"): ServiceStatus(state="idle", extra=extra, updated_s=1.0).encode(),
               status_key("aggregator", "t2"): ServiceStatus(state="idle", extra={"malformed": 0}, updated_s=1.0).encode()}
    rows = [line for line in render(entries, now_s=1.0, title="t").splitlines() if line.startswith("aggregator")]
    assert rows[0].split()[8:] == ["5", "(header", "2,", "no_info", "3)"]
    assert rows[1].split()[8:] == ["-"]
    assert rows[2] == "aggregator t1: lost 0"


def test_an_invalid_value_is_shown_with_its_reason() -> None:
    text = render({"status/producer/r0t0": b"\xc1", "nodegroups/x": b"\x01"}, now_s=0.0, title="t")
    assert "status/producer/r0t0" in text and "ServiceStatus: not valid msgpack" in text
    assert "invalid: NodeGroupRecord: expected a msgpack map, got an unsigned integer" in text


def test_empty_state_says_so() -> None:
    text = render({}, now_s=0.0, title="t")
    assert "no service has published a status" in text and "no NodeGroup is registered" in text


def test_a_last_line_names_every_entry_that_does_not_decode() -> None:
    entries = {
        "status/x/y": b"\x01",
        "status/producer/r0t0": ServiceStatus(state="idle").encode(),
        "nodegroups/x": NodeGroupRecord(uid="other", host="h", ports=[1]).encode(),
        "acquire/request": b"\xc1",
    }
    lines = render(entries, now_s=0.0, title="t").splitlines()
    assert lines[-1] == "3 entries do not decode (shown as invalid above): acquire/request, nodegroups/x, status/x/y"
    assert any(line.startswith("nodegroups/x") and "invalid: holds the record of uid 'other'" in line for line in lines)
    assert "do not decode" not in render({"status/producer/r0t0": entries["status/producer/r0t0"]}, 0.0, "t")


def test_the_kvstore_servers_refusals_are_shown_by_kind() -> None:
    counts = {"malformed": 4, "oversized": 1, "refused_quota": 2, "refused_full": 0, "ttl_clamped": 1,
              "snapshots_dropped": 1990, "errors": 0}
    server = ServiceStatus(state="idle", extra={"snapshots": 12, "keys": 301, **counts}).encode()
    lines = render({status_key("kvstore", "server"): server}, now_s=0.0, title="t").splitlines()
    assert ("kvstore/server refused: malformed 4, oversized 1, refused_quota 2, refused_full 0, ttl_clamped 1, "
            "snapshots_dropped 1990, errors 0") in lines


def test_the_stack_is_the_titles_and_a_service_of_another_or_a_changed_stack_is_flagged() -> None:
    server = ServiceStatus(state="idle", extra={"stack_id": "cccccccccccccccc"}, updated_s=1.0).encode()
    here = {"stack_id": "cccccccccccccccc", "host": "h"}
    entries = {
        status_key("kvstore", "server"): server,
        status_key("producer", "r0t0"): ServiceStatus(state="idle", extra=here, updated_s=1.0).encode(),
        status_key("producer", "r1t0"): ServiceStatus(
            state="idle", extra={**here, "stack_changed": "bbbbbbbbbbbbbbbb"}, updated_s=1.0).encode(),
        status_key("aggregator", "t0"): ServiceStatus(
            state="idle", extra={"stack_id": "aaaaaaaaaaaaaaaa"}, updated_s=1.0).encode(),
    }
    lines = render(entries, now_s=1.0, title="t").splitlines()
    assert "producer r0t0: host h" in lines, "the stack fields stay out of the details"
    assert not any("stack_id" in line or "stack_changed" in line for line in lines)
    flagged = [line for line in lines if "STACK" in line]
    assert flagged == [
        "aggregator t0: OTHER STACK: stack aaaaaaaaaaaaaaaa, not the kvstore's cccccccccccccccc: a service of another "
        "stack writes here, or it has not synced since the kvstore restarted",
        "producer r1t0: STACK CHANGED: joined stack bbbbbbbbbbbbbbbb, now in stack cccccccccccccccc: the kvstore "
        "restarted without its log (a new, empty stack: the scans of the old one are gone) or another stack's "
        "kvstore took its ports; it re-registered",
    ]


def test_no_stack_is_flagged_when_the_kvstore_names_none() -> None:
    entries = {status_key("producer", "r0t0"): ServiceStatus(state="idle", extra={"stack_id": "aaaaaaaaaaaaaaaa"},
                                                            updated_s=1.0).encode()}
    assert "STACK" not in render(entries, now_s=1.0, title="t")


def test_a_producer_thread_of_the_configuration_with_no_status_is_named_with_how_to_start_it() -> None:
    entries = {status_key("producer", "r0t0"): ServiceStatus(state="idle").encode()}
    lines = render(entries, 0.0, "t", producers={"r0t0": 0, "r1t0": 1}).splitlines()
    assert [line for line in lines if "NO STATUS" in line] == [
        "producer r1t0: NO STATUS: its daemon is not running, and receiver 1 streams nothing ('sectorflow up "
        "--only producer-1' starts it again in a stack of 'sectorflow up')"]
