"""The dashboard's state from a replica's content: progress per receiver with rate and time left,
rates, alerts with their time, the scans' history with duration and time to file."""

from __future__ import annotations

from typing import Any

from sectorflow.dashboard.scan_groups import group_scans
from sectorflow.dashboard.view import Remembered, build_view
from sectorflow.protocol.scan_life import ScanAbort, abort_key
from sectorflow.protocol import (
    OUTCOME_COMPLETE,
    STATE_ERROR,
    STATE_FINISHED,
    STATE_IDLE,
    STATE_STREAMING,
    STATE_WRITING_TO_DISK,
    NodeGroupRecord,
    ProducerScanRecord,
    ScanFileRecord,
    ScanRequestRecord,
    ServiceStatus,
    nodegroup_key,
    scan_file_key,
    scan_producer_key,
    scan_request_key,
    status_key,
)

SCAN = 3
GROUPS = ["ng-a", "ng-b"]


def status(state: str, scan: int = SCAN, messages: int = 0, bytes_: int = 0, updated_s: float = 100.0,
           **extra: Any) -> bytes:
    return ServiceStatus(state=state, scan=scan, messages=messages, bytes=bytes_, updated_s=updated_s,
                         extra=extra).encode()


def registration(uid: str, state: str = STATE_IDLE) -> bytes:
    return NodeGroupRecord(uid=uid, host="127.0.0.1", ports=[7000, 7001], node="n1", rank=0, status=state).encode()


def producer_record(receiver: int, state: str, sent: int, updated_s: float) -> bytes:
    return ProducerScanRecord(
        receiver=receiver, thread=0, state=state, routing=GROUPS, counts={"ng-a": 8, "ng-b": 8}, owned=16,
        lost_upstream=0, sent=sent, spilled=0, spill_file="", partial=False, error="", updated_s=updated_s).encode()


def scan_entries(producer_state: str = STATE_STREAMING, with_file: bool = False, sent: int = 10) -> dict[str, bytes]:
    """A 4 x 4 scan over two receivers of one thread each: receiver 0 has sent ``sent`` (its progress
    record), receiver 1 finished."""
    out = {
        scan_request_key(SCAN): ScanRequestRecord(scan_number=SCAN, scan_x=4, scan_y=4, source="simulator",
                                                  routing=GROUPS, producer_threads=[1, 1], requested_s=90.0).encode(),
        status_key("producer", "r0t0"): status(producer_state, messages=10, receiver=0, thread=0, mode="stream"),
        status_key("producer", "r1t0"): status(STATE_FINISHED, messages=16, receiver=1, thread=0, mode="stream"),
        scan_producer_key(SCAN, 0, 0): producer_record(0, STATE_STREAMING, sent, 94.0),
        scan_producer_key(SCAN, 1, 0): producer_record(1, STATE_FINISHED, 16, 95.0),
        nodegroup_key("ng-a"): registration("ng-a"),
        nodegroup_key("ng-b"): registration("ng-b"),
    }
    if with_file:
        out[scan_producer_key(SCAN, 0, 0)] = producer_record(0, STATE_FINISHED, 16, 96.0)
        out[scan_file_key(SCAN)] = ScanFileRecord(
            outcome=OUTCOME_COMPLETE, path="/data/FOURD_0000000003_counted.h5", extra_paths=[], positions=16,
            frames_written=16, positions_missing=0, sectors_counted=[16, 16], reason="", written_s=97.0).encode()
    return out


def view(entries: dict[str, bytes], memory: Remembered | None = None, now_s: float = 100.5,
         reachable: bool = True) -> dict[str, Any]:
    return build_view(group_scans(entries), now_s, memory or Remembered(), reachable=reachable,
                      address="tcp://127.0.0.1:1", sequence=5, recent_scans=10, stack="0123456789abcdef")


def test_the_scan_in_progress_shows_what_each_receiver_has_sent_of_its_sectors() -> None:
    state = view(scan_entries())
    scan = state["scan"]
    assert (scan["scan"], scan["in_progress"], scan["outcome"]) == (SCAN, True, "pending")
    assert [(r["receiver"], r["done"], r["total"]) for r in scan["receivers"]] == [(0, 10, 16), (1, 16, 16)]
    assert state["kvstore"] == {"address": "tcp://127.0.0.1:1", "reachable": True, "sequence": 5,
                                "stack": "0123456789abcdef"}


def test_a_running_scan_shows_each_receivers_rate_and_time_left_as_acquire_wait_computes_them() -> None:
    memory = Remembered()
    first = view(scan_entries(sent=4), memory, now_s=100.0)["scan"]
    # One reading: no rate yet, so the time left is unknown (None); the finished receiver is done (0).
    assert [(r["rate_per_s"], r["left_s"]) for r in first["receivers"]] == [(0.0, None), (0.0, 0.0)]
    assert first["left_s"] is None
    scan = view(scan_entries(sent=8), memory, now_s=102.0)["scan"]
    assert [(r["rate_per_s"], r["left_s"]) for r in scan["receivers"]] == [(2.0, 4.0), (0.0, 0.0)]
    assert (scan["rate_per_s"], scan["left_s"], scan["duration_s"]) == (2.0, 4.0, 12.0)  # requested at 90
    view(scan_entries(STATE_FINISHED, with_file=True), memory, now_s=103.0)
    assert not memory.progress  # a scan over keeps no rates


def test_a_finished_scan_has_its_duration_to_the_last_sector_and_its_time_to_file() -> None:
    scan = view(scan_entries(STATE_FINISHED, with_file=True), now_s=200.0)["recent"][0]
    # Requested at 90, the last producer thread ended at 96, the file was written at 97.
    assert (scan["requested_s"], scan["duration_s"], scan["to_file_s"]) == (90.0, 6.0, 7.0)


def test_a_running_scans_sectors_are_pending_not_missing() -> None:
    scan = view(scan_entries())["scan"]
    # Receiver 0's thread has sent 10 so far, receiver 1's all 16: none counted yet.
    assert (scan["counted"], scan["spilled"], scan["on_disk"], scan["missing"], scan["pending"]) == (0, 0, 0, 0, 32)
    assert (scan["sent"], scan["replay"]) == (26, "")
    assert scan["line"] == "scan 3: pending: 0 counted + 0 spilled + 0 missing + 32 pending = 32 sectors"


def test_a_scan_written_to_disk_for_want_of_a_nodegroup_is_on_disk_with_its_replay_command_not_complete() -> None:
    entries = {scan_request_key(SCAN): ScanRequestRecord(scan_number=SCAN, scan_x=4, scan_y=4, source="simulator",
                                                         routing=[], producer_threads=[1], requested_s=90.0).encode(),
               scan_producer_key(SCAN, 0, 0): ProducerScanRecord(
                   receiver=0, thread=0, state=STATE_FINISHED, routing=[], counts={}, owned=16, lost_upstream=0,
                   sent=0, spilled=16, spill_file="/raw/a.data", partial=False, error="", updated_s=95.0).encode()}
    state = build_view(group_scans(entries), 100.5, Remembered(), reachable=True, address="tcp://127.0.0.1:1",
                       sequence=5, recent_scans=10, config="/etc/sf.toml")
    scan = state["scan"]
    replay = "sectorflow acquire --config /etc/sf.toml --scan-number 3 --scan-shape 4x4 --replay --wait"
    assert (scan["outcome"], scan["on_disk"], scan["spilled"], scan["replay"]) == ("on disk, not counted", 16, 0, replay)
    assert [a["text"] for a in state["alerts"]] == [
        NO_NODEGROUP, f"scan 3: on disk, not counted: 16 on disk + 0 missing = 16 sectors; count it with: {replay}"]


NO_NODEGROUP = ("no NodeGroup is registered: a scan acquired now is written to disk, not counted (start the "
                "NodeGroups: 'sectorflow up', or a streaming session)")


def test_no_nodegroup_registered_is_an_alert_that_clears_when_one_registers() -> None:
    entries = scan_entries(STATE_FINISHED, with_file=True)
    alone = {k: v for k, v in entries.items() if not k.startswith("nodegroups/")}
    alerts = view(alone)["alerts"]
    assert [(a["id"], a["level"], a["text"]) for a in alerts] == [("no-nodegroup", "warning", NO_NODEGROUP)]
    assert view(entries)["alerts"] == []


def test_the_producers_of_an_aborted_scan_are_shown_aborted_not_in_error_and_raise_no_error_alert() -> None:
    entries = scan_entries(STATE_ERROR)
    entries[status_key("producer", "r0t0")] = status(STATE_ERROR, messages=10, receiver=0, thread=0, mode="stream",
                                                     error="the scan was aborted (sectorflow abort)")
    entries[scan_producer_key(SCAN, 0, 0)] = ProducerScanRecord(
        receiver=0, thread=0, state=STATE_ERROR, routing=GROUPS, counts={"ng-a": 8, "ng-b": 8}, owned=16,
        lost_upstream=0, sent=10, spilled=0, spill_file="", partial=False,
        error="the scan was aborted (sectorflow abort)", updated_s=96.0).encode()
    entries[abort_key(SCAN)] = ScanAbort(by="host:1", requested_s=95.0).encode()
    entries[scan_file_key(SCAN)] = ScanFileRecord(
        outcome="incomplete", path="/data/FOURD_0000000003_counted.h5", extra_paths=[], positions=16,
        frames_written=10, positions_missing=6, sectors_counted=[10, 16], reason="aborted (sectorflow abort)",
        written_s=97.0).encode()
    state = view(entries, now_s=200.0)
    assert state["scan"]["outcome"] == "aborted"
    assert [s["state"] for s in state["services"] if s["service"] == "producer"] == ["aborted", "finished"]
    assert [a["level"] for a in state["alerts"]] == ["warning"]  # the scan's own line, amber
    assert state["alerts"][0]["id"] == f"scan/{SCAN}/aborted"


def test_a_finished_scan_shows_its_outcome_and_file_in_the_recent_scans() -> None:
    state = view(scan_entries(STATE_FINISHED, with_file=True))
    recent = state["recent"][0]
    assert (recent["scan"], recent["outcome"], recent["counted"], recent["missing"]) == (SCAN, "complete", 32, 0)
    assert recent["path"] == "/data/FOURD_0000000003_counted.h5"
    assert not state["alerts"]


def test_rates_come_from_two_statuses_of_a_service() -> None:
    memory = Remembered()
    entries = {status_key("aggregator", "t0"): status(STATE_STREAMING, messages=100, bytes_=1_000_000, updated_s=100.0)}
    assert view(entries, memory)["rates"]["bytes_per_s"] == 0.0  # one status: no rate yet
    entries[status_key("aggregator", "t0")] = status(STATE_STREAMING, messages=300, bytes_=5_000_000, updated_s=102.0)
    rates = view(entries, memory, now_s=102.5)["rates"]
    assert (rates["bytes_per_s"], rates["messages_per_s"]) == (2_000_000.0, 100.0)
    assert view(entries, memory, now_s=110.0)["rates"]["bytes_per_s"] == 0.0  # a stale status moves nothing


def test_a_producer_writing_to_disk_is_an_alert() -> None:
    entries = scan_entries(STATE_WRITING_TO_DISK)
    entries[status_key("producer", "r0t0")] = status(STATE_WRITING_TO_DISK, messages=10, receiver=0, thread=0,
                                                     mode="fallback", fallback_dir="/raw")
    texts = [alert["text"] for alert in view(entries)["alerts"]]
    assert f"producer r0t0 is writing scan {SCAN} to disk (fallback) in /raw" in texts


def test_a_nodegroup_gone_without_stopping_is_lost_and_one_that_stopped_is_not() -> None:
    memory = Remembered()
    entries = scan_entries()
    entries[nodegroup_key("ng-b")] = registration("ng-b", "stopping")
    view(entries, memory, now_s=100.0)
    del entries[nodegroup_key("ng-a")], entries[nodegroup_key("ng-b")]
    alerts = view(entries, memory, now_s=104.0)["alerts"]
    assert [a["text"] for a in alerts if "lost" in a["text"]] == [
        "NodeGroup ng-a lost: its registration expired without a stop (0 s ago)"]
    entries[nodegroup_key("ng-a")] = registration("ng-a")
    assert not [a for a in view(entries, memory, now_s=105.0)["alerts"] if "lost" in a["text"]]


def test_an_alert_keeps_the_time_it_was_raised_until_resolved_and_is_raised_anew_later() -> None:
    memory = Remembered()
    view(scan_entries(), memory, now_s=100.0)
    unreachable = [view({}, memory, now_s=t, reachable=False)["alerts"] for t in (101.0, 109.0)]
    assert [(a["id"], a["since_s"]) for alerts in unreachable for a in alerts] == [
        ("kvstore-unreachable", 101.0), ("kvstore-unreachable", 101.0)]
    assert not view(scan_entries(), memory, now_s=110.0)["alerts"]  # resolved: gone, and forgotten
    again = view({}, memory, now_s=120.0, reachable=False)["alerts"]
    assert [(a["id"], a["since_s"]) for a in again] == [("kvstore-unreachable", 120.0)]


def test_an_unreachable_kvstore_is_the_one_alert_and_nothing_is_declared_lost() -> None:
    memory = Remembered()
    view(scan_entries(), memory)
    state = view({}, memory, reachable=False)
    assert [a["text"] for a in state["alerts"]] == [
        "kvstore unreachable: showing the last known state; the dashboard reconnects by itself"]
    assert not memory.lost


def test_refusals_are_summed_by_kind_and_a_bad_status_is_shown_not_skipped() -> None:
    entries = {
        status_key("nodegroup", "ng-a"): status(STATE_IDLE, malformed=3, malformed_header=2, malformed_no_info=1),
        status_key("kvstore", "server"): status(STATE_IDLE, unauthorised=4, oversized=0),
        status_key("aggregator", "t1"): b"\x01not msgpack",
    }
    state = view(entries)
    rows = {(s["service"], s["name"]): s for s in state["services"]}
    assert rows[("nodegroup", "ng-a")]["refused_kinds"] == {"header": 2, "no_info": 1}
    assert rows[("kvstore", "server")]["refused_kinds"] == {"unauthorised": 4}
    assert state["refused"] == 7
    assert [s["state"] for s in state["services"] if s["service"].startswith("status/aggregator")] == ["invalid"]


def test_scan_keys_are_grouped_by_scan_in_one_pass_and_the_rest_kept_apart() -> None:
    entries = {scan_file_key(3): b"a", scan_request_key(3): b"b", scan_request_key(12): b"c",
               status_key("kvstore", "server"): b"d", "scans/not-a-number/file": b"e"}
    groups = group_scans(entries)
    assert groups.scans == {3: {scan_file_key(3): b"a", scan_request_key(3): b"b"}, 12: {scan_request_key(12): b"c"}}
    assert groups.others == {status_key("kvstore", "server"): b"d", "scans/not-a-number/file": b"e"}
    newest = groups.newest(1)
    assert newest.scans == {12: {scan_request_key(12): b"c"}} and newest.others == groups.others


def test_a_scan_whose_records_change_is_accounted_again() -> None:
    memory = Remembered()
    assert view(scan_entries(), memory)["scan"]["outcome"] == "pending"
    assert view(scan_entries(), memory)["scan"]["outcome"] == "pending"  # unchanged: from the last update
    assert view(scan_entries(STATE_FINISHED, with_file=True), memory)["scan"]["outcome"] == "complete"


def test_a_libertem_bridge_has_its_own_entry_with_its_client_counters_and_last_scan_as_acquire_says_it() -> None:
    entries = scan_entries()
    assert view(entries)["libertem"] == []  # no bridge: the page shows no LiberTEM card
    entries[status_key("libertem", "pc")] = status(
        STATE_IDLE, messages=16, listen="127.0.0.1:8283", client_connected=True, last_scan=2, last_scan_served=True,
        last_scan_positions=16, last_scan_empty=3, positions_sent=16, frames_sent=13, positions_empty=3,
        frames_dropped=0, clients_dropped=1)
    [bridge] = view(entries)["libertem"]
    assert (bridge["name"], bridge["listen"], bridge["client_connected"]) == ("pc", "127.0.0.1:8283", True)
    assert (bridge["positions_sent"], bridge["positions_empty"], bridge["clients_dropped"]) == (16, 3, 1)
    assert bridge["last"] == "scan 2: 3 of 16 positions sent empty (never came in time)"
    entries[status_key("libertem", "pc")] = status(STATE_IDLE, listen="127.0.0.1:8283", last_scan=4,
                                                   last_scan_served=False)
    assert view(entries)["libertem"][0]["last"].startswith("scan 4: not served")


def failover_entries() -> dict[str, bytes]:
    """A kvstore pair whose backup took over once, and an aggregator standby's lease held after a takeover."""
    return {
        status_key("kvstore", "server"): ServiceStatus(
            state="idle", scan=0, messages=0, bytes=0, updated_s=100.0,
            extra={"pair": "backup", "pair_state": "active", "peer": "127.0.0.1:7001", "peer_state": "passive",
                   "failovers": 1, "splits": 0}).encode(),
        status_key("aggregator", "active"): ServiceStatus(
            state="streaming", scan=0, messages=0, bytes=0, updated_s=100.0,
            extra={"holder": "hostb:42:ab", "host": "hostb", "pid": 42, "since_s": 90.0, "takeovers": 2,
                   "took_over_from": "hosta:41:cd"}).encode(),
    }


def test_the_page_names_the_active_kvstore_server_and_aggregator_and_counts_failovers() -> None:
    state = view(failover_entries())
    pair, aggregator = state["failover"]
    assert pair.startswith("kvstore pair: the backup is active") and "failovers 1" in pair
    assert "127.0.0.1:7001 is passive" in pair
    assert aggregator.startswith("aggregator: active hostb pid 42") and "takeovers 2" in aggregator
    assert "took over from hosta:41:cd" in aggregator and aggregator.endswith("no standby")


def test_a_single_kvstore_server_and_an_aggregator_with_no_standby_show_no_failover_line() -> None:
    assert view(scan_entries())["failover"] == []


def test_a_producer_that_died_mid_scan_is_an_alert_and_its_scan_ends_with_its_file() -> None:
    # Receiver 0's daemon died after 10 sectors: its status is gone, its record stopped;
    # the NodeGroups wrote the file with the rest. Over, incomplete, and said so; not pending for ever.
    entries = scan_entries(sent=10)
    memory = Remembered()
    assert view(entries, memory)["alerts"] == []
    del entries[status_key("producer", "r0t0")]
    entries[scan_file_key(SCAN)] = ScanFileRecord(
        outcome="incomplete", path="/data/FOURD_0000000003_counted.h5", extra_paths=[], positions=16,
        frames_written=16, positions_missing=0, sectors_counted=[10, 16], reason="", written_s=110.0).encode()
    state = view(entries, memory, now_s=120.0)
    scan = state["scan"]
    assert (scan["in_progress"], scan["outcome"], scan["counted"], scan["missing"]) == (False, "incomplete", 26, 6)
    assert scan["duration_s"] == 5.0  # to the dead thread's last record
    texts = {alert["id"]: alert["text"] for alert in state["alerts"]}
    assert texts["producer-died/3"] == "scan 3: producer r0t0 died mid-scan: its unsent sectors are missing"
    assert texts["producer-lost/r0t0"].startswith("producer r0t0 lost: its status expired without a stop")
    # Its daemon started again (idle, no scan): the scan stays over, and the lost alert clears.
    entries[status_key("producer", "r0t0")] = status(STATE_IDLE, scan=0, receiver=0, thread=0)
    state = view(entries, memory, now_s=130.0)
    assert state["scan"]["outcome"] == "incomplete"
    assert "producer-lost/r0t0" not in {alert["id"] for alert in state["alerts"]}
