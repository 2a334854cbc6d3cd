"""The aggregator daemon's status record and scan summary line, from counters made in the test."""

from __future__ import annotations

import pytest

from sectorflow.aggregator import summary_line, thread_status
from sectorflow.protocol import ServiceStatus
from sectorflow.protocol import REFUSAL_KINDS


class FakeStats:
    """The fields of a RelayStats (the C++ type has no public constructor)."""

    thread = 1
    streaming = True
    scan = 12
    messages = 300
    bytes = 49_766_400
    infos = 2
    lost = 7
    dead = 1
    recovered_scans = 1
    native_scans = 2
    open_scans = 1
    evicted_scans = 2
    malformed = {kind: 0 for kind in REFUSAL_KINDS} | {"header": 2, "info": 1, "no_info": 3}
    first_malformed = {"header": "data header: expected 9 fields, got 3"}


class FakeSummary:
    thread = 2
    scan = 12
    closed = True
    complete = True
    recovered = False
    expected = 100
    forwarded = 97
    bytes = 1_000_000_000
    lost = 3
    seconds = 0.5
    counts = {"ng-a": 50, "ng-b": 47}
    lost_by_uid = {"ng-b": 3}
    dead: dict[str, str] = {}
    note = ""


def test_status_carries_counters_malformed_kinds_and_loss() -> None:
    status = ServiceStatus.decode(thread_status(FakeStats(), lost_last_scan=4).encode())
    assert (status.state, status.scan, status.messages, status.bytes) == ("streaming", 12, 300, 49_766_400)
    assert {k: status.extra[f"malformed_{k}"] for k in REFUSAL_KINDS} == FakeStats.malformed
    assert status.extra["malformed"] == 6
    assert (status.extra["lost"], status.extra["lost_last_scan"], status.extra["open_scans"]) == (7, 4, 1)
    assert status.extra["evicted_scans"] == 2
    assert (status.extra["dead_nodegroups"], status.extra["recovered_scans"], status.extra["native_scans"]) == (1, 1, 2)


@pytest.mark.parametrize("streaming, state", [(True, "streaming"), (False, "idle")])
def test_status_state_follows_open_scans(streaming: bool, state: str) -> None:
    stats = FakeStats()
    stats.streaming = streaming
    assert thread_status(stats, 0).state == state


def test_summary_line_names_scan_counts_rate_and_loss() -> None:
    assert summary_line(FakeSummary()) == (
        "scan 12: thread 2 finished: forwarded 97 of 100 expected messages (ng-a 50, ng-b 47), "
        "1000000000 bytes in 0.500 s (2.00 GB/s), lost 3 (ng-b 3)"
    )


def test_summary_line_names_the_dead_nodegroups_and_a_rebuilt_scan() -> None:
    summary = FakeSummary()
    summary.dead = {"ng-b": "a send stayed blocked"}
    summary.recovered = True
    assert summary_line(summary).endswith(
        "lost 3 (ng-b 3); dead: ng-b; rebuilt from the producers' scan records after a restart")


def test_an_interim_report_is_its_note() -> None:
    summary = FakeSummary()
    summary.closed = False
    summary.note = "declared ng-b dead: a send stayed blocked"
    assert summary_line(summary) == "scan 12: thread 2 declared ng-b dead: a send stayed blocked"
