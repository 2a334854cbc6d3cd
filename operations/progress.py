"""What ``sectorflow acquire --wait`` shows while a scan runs: each receiver's sectors moved so far,
the rate and the time left, from the scan's account (``sectorflow.operations.scan_account``), which the
producer threads' records keep current (kvstore/SPEC.md, "Producer records": every 500 ms at most).

On a terminal: one live bar per receiver, redrawn in place. Otherwise (a log, a pipe): plain lines,
one per receiver, at most every ``LINE_PERIOD_S`` and only when a count moved (or ``QUIET_S``
passed, so that a stalled scan still says it is waiting); none before ``LINE_PERIOD_S`` has passed,
so that a short scan's output is its request and its account, not a line of zeros.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TextIO

from sectorflow.operations.scan_account import PENDING, ReceiverAccount, ScanAccount

BAR_WIDTH = 30
LINE_PERIOD_S = 2.0
QUIET_S = 30.0
REDRAW_S = 0.2
# The rate is the sectors moved over this last stretch of time: recent enough to follow a change of
# pace, long enough that the producers' 500 ms updates do not make it jump.
RATE_WINDOW_S = 10.0


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
    total = int(round(seconds))
    if total < 60:
        return f"{total} s"
    if total < 3600:
        return f"{total // 60} min {total % 60:02d} s"
    return f"{total // 3600} h {total % 3600 // 60:02d} min"


class ReceiverRates:
    """Each receiver's rate (sectors moved per second over the last RATE_WINDOW_S) and time left,
    from successive accounts of one scan: what ``acquire --wait`` prints and the dashboard shows."""

    def __init__(self) -> None:
        self._samples: dict[int, deque[tuple[float, int]]] = {}

    def note(self, result: ScanAccount, now_s: float) -> None:
        """Takes each receiver's sectors moved in ``result`` (the account of the scan at ``now_s``)."""
        for receiver in result.receivers:
            samples = self._samples.setdefault(receiver.receiver, deque())
            samples.append((now_s, receiver.moved))
            while len(samples) > 2 and now_s - samples[1][0] >= RATE_WINDOW_S:
                samples.popleft()

    def rate(self, receiver: int) -> float:
        """Sectors per second moved by ``receiver`` over the last RATE_WINDOW_S (0 before two samples)."""
        samples = self._samples.get(receiver)
        if not samples or len(samples) < 2:
            return 0.0
        (then_s, then), (now_s, moved) = samples[0], samples[-1]
        return (moved - then) / (now_s - then_s) if now_s > then_s else 0.0

    def time_left_s(self, receiver: ReceiverAccount) -> float | None:
        """Seconds until ``receiver``'s last sector moves at its rate: 0 when done, None while no rate is known."""
        left = receiver.sectors - receiver.moved - receiver.missing
        if left <= 0:
            return 0.0
        rate = self.rate(receiver.receiver)
        return left / rate if rate > 0 else None


class ScanProgress:
    """Shows a running scan's progress on ``stream``, one receiver per line; ``show`` rate-limits itself.

    Args:
        stream: where to write (acquire writes progress to stderr, the outcome to stdout).
        live: redraw bars in place; default: whether ``stream`` is a terminal.
    """

    def __init__(self, stream: TextIO, live: bool | None = None) -> None:
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self._rates = ReceiverRates()
        self._drawn = 0          # lines of the live display on the screen
        self._shown_s: float | None = None  # when the last plain lines or redraw went out
        self._shown: tuple[int, ...] | None = None

    def show(self, result: ScanAccount, waiting: list[str] | None = None, now_s: float | None = None) -> None:
        """Notes ``result`` (the account of the scan now) and shows it when due.

        ``waiting``: producer threads that have not taken the request yet.
        """
        now_s = time.monotonic() if now_s is None else now_s
        self._rates.note(result, now_s)
        counts = tuple(n for r in result.receivers for n in (r.moved, r.counted, r.missing)) + (len(waiting or ()),)
        if self._shown_s is None and not self.live:  # the first plain lines wait a period
            self._shown_s, self._shown = now_s, ()
            return
        if self.live:
            if self._shown_s is not None and now_s - self._shown_s < REDRAW_S:
                return
            self._redraw(self._lines(result, waiting, now_s, bars=True))
        else:
            due = now_s - self._shown_s >= (LINE_PERIOD_S if counts != self._shown else QUIET_S)
            if not due:
                return
            self.stream.write("".join(f"{line}\n" for line in self._lines(result, waiting, now_s, bars=False)))
            self.stream.flush()
        self._shown_s, self._shown = now_s, counts

    def rate(self, receiver: int) -> float:
        """Sectors per second moved by ``receiver`` over the last RATE_WINDOW_S (0 before two samples)."""
        return self._rates.rate(receiver)

    def _lines(self, result: ScanAccount, waiting: list[str] | None, now_s: float, bars: bool) -> list[str]:
        verb = "written to disk" if result.planned_on_disk else "sent"
        lines = []
        for receiver in result.receivers:
            lines.append(self._receiver_line(result.scan, receiver, verb, bars))
        if waiting:
            lines.append(f"scan {result.scan}: not yet taken by {', '.join(waiting)}")
        elif result.receivers and all(r.moved + r.missing >= r.sectors for r in result.receivers) \
                and result.outcome == PENDING and not result.planned_on_disk:
            lost = f" or lost ({result.missing} missing)" if result.missing else ""
            lines.append(f"scan {result.scan}: every sector sent{lost}; waiting for the NodeGroups' file")
        return lines

    def _receiver_line(self, scan: int, receiver: ReceiverAccount, verb: str, bars: bool) -> str:
        total = max(receiver.sectors, 1)
        fraction = min(receiver.moved / total, 1.0)
        rate = self.rate(receiver.receiver)
        left_s = self._rates.time_left_s(receiver)
        if left_s == 0:
            eta = "done"
        elif left_s is not None:
            eta = f"{duration(left_s)} left"
        else:
            eta = "time left unknown"
        faults = []
        if receiver.spilled:
            faults.append(f"{receiver.spilled} spilled")
        if receiver.missing:
            faults.append(f"{receiver.missing} missing")
        extra = f", {', '.join(faults)}" if faults else ""
        if bars:
            filled = int(round(fraction * BAR_WIDTH))
            return (f"receiver {receiver.receiver} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] "
                    f"{receiver.moved}/{receiver.sectors} {verb} {100 * fraction:3.0f}%{extra}  {rate:.1f}/s  {eta}")
        return (f"scan {scan} receiver {receiver.receiver}: {receiver.moved} of {receiver.sectors} {verb} "
                f"({100 * fraction:.0f}%){extra}; {rate:.1f} sectors/s, {eta}")

    def _redraw(self, lines: list[str]) -> None:
        # Up to the first line of the last drawing, then each line cleared and written again.
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        tail = "".join("\x1b[2K\n" for _ in range(self._drawn - len(lines)))  # lines no longer needed
        self.stream.write(up + "".join(f"\x1b[2K{line}\n" for line in lines) + tail)
        self.stream.flush()
        self._drawn = max(len(lines), self._drawn)

    def finish(self, result: ScanAccount) -> None:
        """The last drawing of a live display, with the scan's final counts (plain lines print nothing more)."""
        if self.live and self._drawn:
            self._redraw(self._lines(result, None, time.monotonic(), bars=True))
