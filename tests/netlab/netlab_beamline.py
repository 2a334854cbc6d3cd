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


def accounted(stack: NetlabStack, outcome: Outcome, scan: int, sectors: int, fault: str) -> Outcome:
    """Every sector of ``scan`` counted, spilled or missing, and the account agrees with the HDF5 file
    and the raw files on disk (tests/faults' rules); prints the fault table's row (``pytest -s``)."""
    line = accounting(stack)
    assert outcome.sectors == sectors, outcome.output
    assert outcome.counted + outcome.spilled + outcome.on_disk + outcome.missing == outcome.sectors, outcome.output
    on_file = line.sectors_in_file(outcome.path) if outcome.path is not None else 0
    assert outcome.counted == on_file, outcome.output
    assert outcome.spilled + outcome.on_disk == line.records_on_disk(scan), outcome.output
    print(f"| {fault} | {outcome.sectors} | {outcome.counted} | {outcome.spilled + outcome.on_disk} | {outcome.missing} | "
          f"{outcome.outcome} | {outcome.exit_code} |")
    return outcome
