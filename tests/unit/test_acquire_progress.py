"""What `acquire --wait` shows while a scan runs: per receiver, sectors moved, rate, time left; live
bars on a terminal, rate-limited plain lines elsewhere."""

from __future__ import annotations

import io

from sectorflow.operations.progress import ScanProgress, duration
from sectorflow.operations.scan_account import PENDING, ReceiverAccount, ScanAccount


def running(sent: list[int], sectors: int = 1000, on_disk: bool = False) -> ScanAccount:
    receivers = [ReceiverAccount(r, sectors, sent=0 if on_disk else n, on_disk=n if on_disk else 0,
                                 pending=sectors - n if on_disk else sectors)
                 for r, n in enumerate(sent)]
    return ScanAccount(9, PENDING, receivers, planned_on_disk=on_disk)


def test_plain_lines_per_receiver_with_rate_and_time_left_at_most_every_2_s_and_only_when_counts_move() -> None:
    out = io.StringIO()
    shown = ScanProgress(out, live=False)
    shown.show(running([0, 0]), now_s=100.0)  # a scan's first output is its request, not a line of zeros
    shown.show(running([50, 40]), now_s=101.0)  # not yet due
    assert out.getvalue() == ""
    shown.show(running([100, 80]), now_s=102.0)
    assert out.getvalue().splitlines() == [
        "scan 9 receiver 0: 100 of 1000 sent (10%); 50.0 sectors/s, 18 s left",
        "scan 9 receiver 1: 80 of 1000 sent (8%); 40.0 sectors/s, 23 s left"]
    shown.show(running([100, 80]), now_s=105.0)  # nothing moved: quiet
    assert len(out.getvalue().splitlines()) == 2
    shown.show(running([100, 80]), now_s=133.0)  # still nothing after QUIET_S: said again
    assert len(out.getvalue().splitlines()) == 4


def shown_after_a_period(result: ScanAccount, waiting: list[str] | None = None) -> str:
    out = io.StringIO()
    shown = ScanProgress(out, live=False)
    shown.show(result, waiting, now_s=0.0)
    shown.show(result, waiting, now_s=30.0)
    return out.getvalue()


def test_a_scan_written_to_disk_says_so_and_sent_scan_waits_for_the_file() -> None:
    assert shown_after_a_period(running([1000], on_disk=True)) == (
        "scan 9 receiver 0: 1000 of 1000 written to disk (100%); 0.0 sectors/s, done\n")
    assert shown_after_a_period(running([1000, 1000]), ["r1t0"]).splitlines()[-1] == "scan 9: not yet taken by r1t0"
    assert shown_after_a_period(running([1000, 1000])).splitlines()[-1] == (
        "scan 9: every sector sent; waiting for the NodeGroups' file")


def test_live_bars_are_redrawn_in_place() -> None:
    out = io.StringIO()
    shown = ScanProgress(out, live=True)
    shown.show(running([0, 0]), now_s=0.0)
    shown.show(running([500, 250]), now_s=10.0)
    first, second = out.getvalue().split("\x1b[2F")  # the second drawing starts two lines up
    assert first.count("\n") == 2 and second.count("\x1b[2K") == 2
    assert ("receiver 0 [###############---------------] 500/1000 sent  50%  50.0/s  10 s left"
            in second), second
    assert "receiver 1 [########----------------------] 250/1000 sent  25%  25.0/s  30 s left" in second


def test_durations_read_as_a_person_says_them() -> None:
    assert [duration(s) for s in (0.4, 42, 185, 7620)] == ["0 s", "42 s", "3 min 05 s", "2 h 07 min"]
