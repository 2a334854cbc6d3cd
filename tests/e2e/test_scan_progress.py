"""Progress you can trust, on a running stack (`sectorflow up`, real processes, NodeGroups under mpiexec):
a scan with no NodeGroup registered ends "on disk, not counted" with the exact replay command, in
`acquire --wait`, `sectorflow status` and the dashboard alike; a slow scan's `acquire --wait` log (not a
terminal) shows the sectors sent rising before the end while the dashboard's /api/state says they are
pending, not missing; and the replay command, run once NodeGroups are registered, counts the scan.
"""

from __future__ import annotations

import json
import re
import shlex
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support import sectorflow_command, stack_up, wait_until

from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration.stack import stack_services

pytestmark = pytest.mark.mpi

SMALL_DETECTOR = {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}
# 96 positions paced at 8 frames per second: at least 12 s, over which acquire prints a line every 2 s.
SLOW_SHAPE, SLOW_RATE_HZ = (12, 8), 8.0
START_S, SCAN_S = 60.0, 180.0


def page_state(url: str) -> dict[str, Any] | None:
    """The dashboard's /api/state, or None while it does not answer."""
    try:
        with urllib.request.urlopen(url + "api/state", timeout=5) as answer:
            return json.loads(answer.read())
    except (OSError, ValueError):
        return None


def page_scan(url: str, scan: int) -> dict[str, Any] | None:
    state = page_state(url)
    if not state:
        return None
    return next((s for s in [state.get("scan") or {}, *state.get("recent", [])] if s.get("scan") == scan), None)


def sent_lines(log: str, scan: int) -> dict[int, list[int]]:
    """Receiver -> the sectors sent, in the order acquire's progress lines said them."""
    counts: dict[int, list[int]] = {}
    for match in re.finditer(rf"^scan {scan} receiver (\d+): (\d+) of (\d+) sent", log, re.MULTILINE):
        counts.setdefault(int(match[1]), []).append(int(match[2]))
    return counts


def test_on_disk_then_progress_pending_not_missing_then_the_replay_command_counts_it(
        make_config, processes, tmp_path: Path) -> None:
    config, path = make_config(detector=SMALL_DETECTOR, dashboard={"update_ms": 200})
    output = tmp_path / "h5"
    url = config.dashboard.url()
    sectors_of = {1: 4 * 4 * config.n_receivers, 2: SLOW_SHAPE[0] * SLOW_SHAPE[1] * config.n_receivers}
    with stack_up(config, path, tmp_path / "run", output, START_S, nodegroups=False) as client:
        # 1. No NodeGroup registered: the producers write the scan to disk, as planned: exit 0, and the
        # outcome says so, with the command that counts it later.
        replay = (f"sectorflow acquire --config {shlex.quote(str(path.resolve()))} --scan-number 1 --scan-shape 4x4 "
                  "--replay --wait")
        first = sectorflow_command("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", "4x4",
                                   "--wait", "--timeout", str(SCAN_S))
        assert first.returncode == 0, first.stderr
        assert (f"scan 1: on disk, not counted: {sectors_of[1]} on disk + 0 missing = {sectors_of[1]} sectors; "
                f"count it with: {replay}") in first.stdout.splitlines(), first.stdout
        assert "spilled" not in first.stdout and "written to" in first.stdout
        status = sectorflow_command("status", "--config", str(path))
        assert status.returncode == 0, status.stderr
        assert f"scan 1: on disk, not counted; count it with: {replay}" in status.stdout.splitlines(), status.stdout
        on_disk = wait_until(lambda: (s := page_scan(url, 1)) and s["outcome"] != "pending" and s, START_S,
                             "the dashboard to list scan 1")
        assert (on_disk["outcome"], on_disk["on_disk"], on_disk["spilled"], on_disk["replay"]) == (
            "on disk, not counted", sectors_of[1], 0, replay)

        # 2. NodeGroups register (as a session's would); a slow scan streams to them.
        spec = next(s for s in stack_services(config, 2, output) if s.name == "nodegroups")
        processes.start(*spec.argv, name="nodegroups", env=dict(spec.env))
        wait_until(lambda: len(client.nodegroups()) == 2, START_S, "two NodeGroups to register")
        acquire = processes.sectorflow(
            "acquire", "--config", str(path), "--scan-number", "2", "--scan-shape", "x".join(map(str, SLOW_SHAPE)),
            "--rate", str(SLOW_RATE_HZ), "--wait", "--timeout", str(SCAN_S), name="acquire-2")
        total = SLOW_SHAPE[0] * SLOW_SHAPE[1]
        # While it runs, the dashboard counts its sectors pending, not missing.
        running = wait_until(lambda: (s := page_scan(url, 2)) and s["in_progress"] and 0 < s["sent"] < sectors_of[2]
                             and s, SCAN_S, "the dashboard to show scan 2 moving")
        assert (running["outcome"], running["missing"], running["counted"]) == ("pending", 0, 0), running
        assert running["pending"] == sectors_of[2], running
        # ... and acquire's log shows the sectors sent so far, before the end.
        wait_until(lambda: any(0 < n < total for counts in sent_lines(processes.output(acquire), 2).values()
                               for n in counts), SCAN_S, "acquire to print a count of sectors sent mid-scan")
        wait_until(lambda: acquire.poll() is not None, SCAN_S, "acquire --wait of scan 2 to end")
        log = processes.output(acquire)
        assert acquire.returncode == 0, log
        counts = sent_lines(log, 2)
        assert sorted(counts) == list(range(config.n_receivers)), log
        assert all(c == sorted(c) for c in counts.values()), log  # they only rise
        assert any(len({n for n in c if 0 < n < total}) >= 1 for c in counts.values()), log
        assert f"scan 2: complete: {sectors_of[2]} counted + 0 spilled + 0 missing = {sectors_of[2]} sectors" in log

        # 3. The command the on-disk scan named counts it.
        words = shlex.split(replay)
        assert words[:2] == ["sectorflow", "acquire"]
        replayed = sectorflow_command(*words[1:], "--timeout", str(SCAN_S))
        assert replayed.returncode == 0, replayed.stderr
        h5 = output / scan_file_name(1)
        assert (f"scan 1: complete: {sectors_of[1]} counted + 0 spilled + 0 missing = {sectors_of[1]} sectors; "
                f"file {h5}") in replayed.stdout.splitlines(), replayed.stdout
        assert h5.exists()
        status = sectorflow_command("status", "--config", str(path))
        assert "count it with" not in status.stdout, status.stdout
        row = next(line for line in status.stdout.splitlines() if line.startswith("1 "))
        assert row.split()[:5] == ["1", "4", "x", "4", "complete"], status.stdout
