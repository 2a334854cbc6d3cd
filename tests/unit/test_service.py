"""The daemons' shared lifecycle: SIGTERM and SIGINT set the stop event (and call on_stop), the
previous handlers come back afterwards, and state transitions are logged."""

from __future__ import annotations

import logging
import os
import signal

import pytest

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


def test_state_transitions_are_logged(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="test-service"):
        state = ServiceState(LOGGER)
        state.enter("serving")
        state.enter("stopped")
    assert state.state == "stopped"
    assert [r.getMessage() for r in caplog.records] == [
        "state starting", "state starting -> serving", "state serving -> stopped"]
