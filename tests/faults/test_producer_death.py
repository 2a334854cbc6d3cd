"""A producer daemon SIGKILLed mid-scan is an event, not a mystery.

One receiver of four dies a quarter into a scan big enough that its missing sectors fill the
NodeGroups' frame pools many times over. The other receivers' sectors are all counted (no NodeGroup
is declared dead for one silent receiver, nothing is spilled), the NodeGroups close the dead
receiver's port once they find its producer gone (not after ``[nodegroup] scan_timeout_s``), its
unsent sectors are missing with the reason, acquire warns in its log, and once the file is written
the scan is over (incomplete) for ``acquire``, ``sectorflow status`` and after the producer is
started again.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace

import pytest
from beamline import Beamline

from sectorflow.kvstore import Client
from sectorflow.waiting import wait_until

from test_faults import checked, first_scan, reasons_are

pytestmark = pytest.mark.mpi

SHAPE, POSITIONS = "32x32", 1024
SECTORS = POSITIONS * 4
RATE_HZ = 100.0  # about 10 s per scan: the kill lands a quarter in
DEAD = 1


def status_text(line: Beamline) -> str:
    done = subprocess.run([sys.executable, "-m", "sectorflow", "status", "--config", str(line.config_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def scan_row(text: str, scan: int) -> list[str]:
    """The words of ``scan``'s row in the status's scan table."""
    rows = [row.split() for row in text.splitlines() if row.split()[:1] == [str(scan)] and " x " in row]
    assert len(rows) == 1, text
    return rows[0]


def test_a_producer_daemon_killed_mid_scan_leaves_the_other_receivers_counted(beamline) -> None:
    line = beamline()
    supervisor = line.start()
    before = first_scan(line)
    with Client.from_config(line.config, name="fault-test") as client:
        client.wait_synced(10.0)
        acquire = line.acquire(2, SHAPE, RATE_HZ)
        line.wait_sent(client, 2, SECTORS // 4)
        line.kill(supervisor.process(f"producer-{DEAD}").pid)
    result = checked(line, Beamline.finish(acquire), 2, f"producer {DEAD} killed mid-scan (32 x 32)", SECTORS)
    assert (result.outcome, result.exit_code, result.spilled) == ("incomplete", 1, 0), result.output
    reasons = result.reasons()
    # The live receivers' sectors all reached the file: one silent receiver kills no NodeGroup.
    for receiver in (0, 2, 3):
        assert reasons[receiver] == (0, []), result.output
    assert f"  receiver 0: {POSITIONS} counted, 0 spilled, 0 missing\n" in result.output, result.output
    assert "declared dead" not in result.output, result.output
    assert 0 < result.missing < POSITIONS, result.output
    reasons_are(result, "not sent by thread 0, which died mid-scan")
    # The NodeGroups closed the dead receiver's port once they found its producer gone, not after
    # [nodegroup] scan_timeout_s: no part timed out, and each incomplete frame lacks that one sector.
    assert "timed out" not in result.output, result.output
    assert f"\n  file: incomplete: {result.missing} frames incomplete\n" in result.output, result.output
    # acquire said so in its log when it found the daemon gone, not only in the account.
    assert re.search(rf"WARNING.*scan 2: producer r{DEAD}t0 died mid-scan", result.output), result.output
    # Over for `sectorflow status` too, in the account's words, with the death named.
    text = status_text(line)
    assert scan_row(text, 2)[4:7] == ["incomplete", f"{result.counted:,}", "0"], text
    assert f"scan 2: producer r{DEAD}t0 died mid-scan" in text, text
    assert f"producer r{DEAD}t0: NO STATUS: its daemon is not running" in text, text
    # Started again, the receiver's daemon does not bring the scan back to pending; the next scan is whole.
    spec = supervisor.spec(f"producer-{DEAD}")
    supervisor.start(replace(spec, name=f"producer-{DEAD}-again"))
    with Client.from_config(line.config, name="fault-test") as client:
        wait_until(lambda: ("producer", f"r{DEAD}t0") in client.statuses("producer"), 60, "the restarted producer")
    text = status_text(line)
    assert scan_row(text, 2)[4] == "incomplete", text
    assert "NO STATUS" not in text, text
    after = Beamline.finish(line.acquire(3, "4x4", 0.0))
    assert (after.outcome, after.exit_code, after.counted) == ("complete", 0, 64), after.output
    assert {k: v for k, v in line.checksums().items() if k in before} == before
