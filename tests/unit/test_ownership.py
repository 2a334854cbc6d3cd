"""sectorflow.ownership's view of a process of this host: alive, gone, or killed and not yet reaped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sectorflow.ownership import _pid_alive
from sectorflow.waiting import wait_until


def test_a_killed_process_its_parent_has_not_reaped_is_not_alive() -> None:
    # The fault suite's supervisor reaps between polls: an aggregator restarted at once after a kill
    # found its predecessor's pid still in the process table and refused to start.
    # A child that lives until it is killed: it waits on a pipe nobody writes to.
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert _pid_alive(child.pid)
        child.kill()
        wait_until(lambda: Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z", 10,
                   "the child to be a zombie")
        assert not _pid_alive(child.pid)
    finally:
        child.stdin.close()
        child.wait()
    assert not _pid_alive(child.pid)
    assert _pid_alive(os.getpid())
