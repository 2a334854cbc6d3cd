"""The one deadline wait: the first true value, a timeout that is one line at the command line,
no deadline at all, a callback on every unsuccessful poll, a stop event; and rate-limited progress."""

from __future__ import annotations

import threading

import pytest

from sectorflow.errors import SectorflowError
from sectorflow.waiting import WaitTimeout, every, wait_until


def test_the_first_true_value_is_returned() -> None:
    values = iter([0, None, "", "ready", "later"])
    assert wait_until(lambda: next(values), 10, "a value", 0.0) == "ready"


def test_a_timeout_names_what_was_awaited_and_is_a_sectorflow_error_and_a_timeout_error() -> None:
    with pytest.raises(WaitTimeout, match=r"^timed out after 0.01 s waiting for the moon$") as caught:
        wait_until(lambda: False, 0.01, "the moon", 0.0)
    assert isinstance(caught.value, SectorflowError)
    assert isinstance(caught.value, TimeoutError)


def test_no_deadline_waits_for_as_long_as_it_takes() -> None:
    polls = iter(range(1, 1000))
    assert wait_until(lambda: next(polls) == 50, None, "the 50th poll", 0.0) is True


def test_on_poll_runs_after_every_false_poll_with_the_time_waited() -> None:
    values = iter([False, False, True])
    seen: list[float] = []
    wait_until(lambda: next(values), 10, "the third poll", 0.0, on_poll=seen.append)
    assert len(seen) == 2
    assert 0.0 <= seen[0] <= seen[1]


def test_an_error_raised_by_on_poll_ends_the_wait() -> None:
    def died(_elapsed_s: float) -> None:
        raise SectorflowError("the aggregator exited with code 1")

    with pytest.raises(SectorflowError, match="the aggregator exited with code 1"):
        wait_until(lambda: False, 10, "the stack", 0.0, on_poll=died)


def test_a_set_stop_event_ends_the_wait_with_none() -> None:
    stop = threading.Event()
    stop.set()
    assert wait_until(lambda: False, 10, "nothing", 0.0, stop=stop) is None


def test_every_reports_on_the_first_poll_then_once_per_period() -> None:
    reported: list[float] = []
    report = every(2.0, reported.append)
    for elapsed_s in (0.0, 0.1, 1.9, 2.0, 3.5, 4.1, 5.0, 6.2):
        report(elapsed_s)
    assert reported == [0.0, 2.0, 4.1, 6.2]
