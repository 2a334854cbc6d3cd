"""`sectorflow abort N` on a running stack (kvstore, aggregator, 4 producer daemons, 2 NodeGroup
ranks under mpiexec): a slow scan aborted mid-way ends everywhere; its `acquire --wait` exits 4,
its file exists and says aborted, its account adds up (counted + spilled + missing = sectors, the
missing ones placed at the abort), and the next scan on the same stack is whole.

The relays and NodeGroups close the aborted scan themselves, by the relays' counts: the NodeGroups'
scan timeout is far longer than the test may wait for the file, so it cannot pass by a timeout. The
same with an aggregation tier of three (protocol/SPEC.md): each member's relay threads close it by
what the producers sent through that member."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from harness import free_port_block
from support import Processes, sectorflow_command, stack_up, wait_until

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.protocol import scan_prefix, wall_clock_s
from sectorflow.protocol.scan_life import ScanAbort, abort_key
from sectorflow.operations.scan_account import records_of

pytestmark = pytest.mark.mpi

DETECTOR = {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}
START_S = 120.0
SCAN_X, SCAN_Y = 20, 20  # 400 frames at 10 Hz: 40 s, aborted within the first seconds
RATE_HZ = 10.0
# Longer than every wait below together: a file that came by the timeout would come too late.
SCAN_TIMEOUT_S = 3600.0


@pytest.mark.parametrize("tier", [1, 3])
def test_an_aborted_scan_ends_everywhere_and_the_next_is_whole(make_config, processes: Processes,
                                                               tmp_path: Path, tier: int) -> None:
    aggregator = {"base_port": free_port_block("127.0.0.1", tier * 4)}
    if tier > 1:
        aggregator["tier"] = ["127.0.0.1"] * tier
    config, path = make_config(detector=DETECTOR, nodegroup={"scan_timeout_s": SCAN_TIMEOUT_S}, aggregator=aggregator)
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output, START_S) as client:
        waiting = processes.sectorflow("acquire", "--config", str(path), "--scan-shape", f"{SCAN_X}x{SCAN_Y}",
                                       "--rate", str(RATE_HZ), "--wait", name="acquire")
        wait_until(lambda: re.search(r"scan (\d+): requested", processes.output(waiting)), START_S, "the request")
        scan = int(re.search(r"scan (\d+): requested", processes.output(waiting)).group(1))
        assert scan == 1  # the first number a fresh stack hands out

        def received() -> int:
            return sum(s.messages for s in client.statuses("nodegroup").values() if s.scan == scan)

        # Some frames' four sectors in the NodeGroups (their statuses are published as they receive).
        wait_until(lambda: received() >= 40, START_S, "the scan under way")
        aborted = sectorflow_command("abort", "--config", str(path), str(scan), timeout_s=60)
        assert aborted.returncode == 0, aborted.stderr
        assert aborted.stdout.startswith(f"scan {scan}: aborted;")
        taken = time.monotonic()

        wait_until(lambda: waiting.poll() is not None, START_S, "acquire --wait to end")
        ended_s = time.monotonic() - taken
        out = processes.output(waiting)
        assert waiting.returncode == 4, out
        line = re.search(rf"^scan {scan}: aborted: (\d+) counted \+ (\d+) spilled \+ (\d+) missing = (\d+) sectors; "
                         rf"file (\S+)$", out, re.MULTILINE)
        assert line, out
        counted, spilled, missing, sectors = (int(line.group(i)) for i in range(1, 5))
        assert sectors == SCAN_X * SCAN_Y * 4 and counted + spilled + missing == sectors
        assert 0 < counted and 0 < missing, out
        # Every missing sector is placed: the producers never sent it because of the abort.
        records = records_of(client.subtree(scan_prefix(scan)), scan)
        not_sent = sum(p.owned - p.lost_upstream - p.sent - p.spilled for p in records.producers.values())
        assert not_sent > 0 and all("aborted" in p.error for p in records.producers.values() if p.state == "error")
        # Closed by the relays' counts, not by a timeout: each relay thread closed it unfinished with all the
        # producers sent, each NodeGroup with all the relays forwarded; nothing was lost on the way.
        assert sorted(records.relays) == list(range(4))
        for thread, relay in records.relays.items():
            sent = sum(p.sent for (receiver, _), p in records.producers.items() if receiver == thread)
            assert not relay.complete and sum(relay.forwarded.values()) == sent and not any(relay.lost.values())
        assert len(records.nodegroups) == 2 and not any(part.timed_out for part in records.nodegroups.values())
        assert missing == not_sent, out
        assert "the scan was aborted (sectorflow abort)" in out
        assert f"\n  aborted by {records.abort.by} (sectorflow abort)\n" in out, out
        file = Path(line.group(5))
        assert file == output / scan_file_name(scan)
        counted_scan = read_counted_scan(file)
        completeness = counted_scan.metadata["completeness"]
        assert completeness["outcome"] == "aborted" and not counted_scan.metadata["scan"]["timed_out"]
        assert "aborted by the operator (sectorflow abort)" in str(completeness["reason"])

        # `sectorflow status` says it in the same word, with the same counts.
        status = sectorflow_command("status", "--config", str(path), timeout_s=60)
        assert status.returncode == 0, status.stderr
        row = next(line.split() for line in status.stdout.splitlines() if line.split()[:1] == [str(scan)])
        assert "aborted" in row and f"{counted:,}" in row and f"{missing:,}" in row, status.stdout

        # Over now: another abort is an error (exit 1); a scan the kvstore never saw is a usage error (exit 2).
        again = sectorflow_command("abort", "--config", str(path), str(scan), timeout_s=60)
        assert again.returncode == 1 and again.stderr.splitlines()[-1] == (
            f"sectorflow abort: error: scan {scan} was aborted already, by " + records.abort.by)
        unknown = sectorflow_command("abort", "--config", str(path), "99", timeout_s=60)
        assert unknown.returncode == 2 and unknown.stderr.splitlines()[-1].startswith(
            "sectorflow abort: error: scan 99 is not known to the kvstore")

        # The stack is whole again: the next scan, numbered by the kvstore, is complete, although an abort
        # of its number was written before its request (anyone may, on a plain stack): acquire erases it
        # and says so, and neither the producers, the relays, the NodeGroups nor the file take it.
        client.set_once(abort_key(scan + 1), ScanAbort("elsewhere:1", wall_clock_s()).encode())
        wait_until(lambda: client.get(abort_key(scan + 1)) is not None, START_S, "the early abort")
        following = sectorflow_command("acquire", "--config", str(path), "--scan-shape", "6x6", "--wait",
                                       "--timeout", "120", timeout_s=180)
        assert following.returncode == 0, following.stdout + following.stderr
        assert f"scan {scan + 1}: complete: 144 counted + 0 spilled + 0 missing = 144 sectors" in following.stdout
        assert f"scan {scan + 1}: an abort by elsewhere:1 at " in following.stderr, following.stderr
        following_file = read_counted_scan(output / scan_file_name(scan + 1))
        assert following_file.metadata["completeness"]["outcome"] == "complete"
        print(f"acquire --wait of the aborted scan ended {ended_s:.2f} s after the abort was taken "
              f"(scan_timeout_s {SCAN_TIMEOUT_S:g})")
