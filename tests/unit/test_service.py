"""The daemons' shared lifecycle: SIGTERM and SIGINT set the stop event (and call on_stop), the
previous handlers come back afterwards, and state transitions are logged."""

from __future__ import annotations

import logging
import os
import signal

import pytest

from sectorflow.protocol import SERVICE_STATES, transition_allowed
from sectorflow.service import ServiceState, stop_on_signals

LOGGER = logging.getLogger("test-service")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_sets_the_event_and_calls_on_stop(signum: int, caplog) -> None:
    called = []
    with caplog.at_level(logging.INFO, logger="test-service"), \
            stop_on_signals(LOGGER, on_stop=lambda: called.append(True)) as stop:
        assert not stop.is_set()
        os.kill(os.getpid(), signum)  # Python runs the handler before the next bytecode here
        assert stop.wait(10)
    assert called == [True]
    assert f"received {signal.Signals(signum).name}: stopping" in caplog.text


def test_previous_handlers_come_back() -> None:
    def mine(_signum, _frame) -> None:
        return None

    before = signal.signal(signal.SIGTERM, mine)
    try:
        with stop_on_signals(LOGGER):
            assert signal.getsignal(signal.SIGTERM) is not mine
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)


def test_state_transitions_are_logged_and_published(caplog) -> None:
    published = []
    with caplog.at_level(logging.INFO, logger="test-service"):
        state = ServiceState(LOGGER, publish=published.append, name="nodegroup ng-1")
        state.enter("idle")
        state.enter("streaming", why="scan 3")
        state.enter("stopping")
        state.enter("stopped")
    assert state.state == "stopped"
    assert published == ["starting", "idle", "streaming", "stopping", "stopped"]
    assert [r.getMessage() for r in caplog.records] == [
        "nodegroup ng-1: state starting", "nodegroup ng-1: state starting -> idle",
        "nodegroup ng-1: state idle -> streaming (scan 3)", "nodegroup ng-1: state streaming -> stopping",
        "nodegroup ng-1: state stopping -> stopped"]


@pytest.mark.parametrize(("path", "refused"), [
    (["streaming"], "streaming"),                  # working before starting is over
    (["idle", "stopping", "idle"], "idle"),        # coming back from stopping
    (["idle", "stopping", "stopped", "starting"], "starting"),
    (["idle", "serving"], "serving"),              # not a state
])
def test_transitions_outside_the_state_machine_are_refused(path: list[str], refused: str) -> None:
    state = ServiceState(LOGGER)
    for step in path[:-1]:
        state.enter(step)
    with pytest.raises(ValueError, match=f"no transition from state .* to '{refused}'"):
        state.enter(path[-1])


def test_the_state_machine_is_the_one_the_cpp_side_declares() -> None:
    assert SERVICE_STATES == ("starting", "idle", "streaming", "writing-to-disk", "counting", "writing", "finished",
                              "error", "stopping", "stopped")
    serving = [s for s in SERVICE_STATES if s not in ("starting", "stopping", "stopped")]
    assert all(transition_allowed(a, b) for a in serving for b in serving if a != b)
    assert [s for s in SERVICE_STATES if transition_allowed("starting", s)] == ["idle", "error", "stopping"]
    assert [s for s in SERVICE_STATES if transition_allowed("stopping", s)] == ["stopped"]
    assert not any(transition_allowed("stopped", s) for s in SERVICE_STATES)
