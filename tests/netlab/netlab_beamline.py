"""The netlab stack for tests: harness/netlab's NetlabStack on the test's Processes, with the fault
suite's accounting (tests/faults/beamline.py) of ``acquire --wait``'s output."""

from __future__ import annotations

import subprocess

from beamline import Beamline, Outcome
from harness.netlab.stack import NetlabStack


def finish(stack: NetlabStack, process: subprocess.Popen[str]) -> Outcome:
    """The scan's account (the fault suite's parser); the services' logs join a failure."""
    try:
        return Beamline.finish(process)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{stack.logs()}") from None


def accounting(stack: NetlabStack) -> Beamline:
    """The fault suite's checks of files and raw records for ``stack``'s configuration."""
    return Beamline(stack.config, stack.path, stack.supervisor.run_dir)
