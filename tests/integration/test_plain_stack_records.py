"""Records anyone on a plain stack's network can write (docs/deployment.md): a
claim of scan 4294967295 does not end the automatic numbering, and an abort written before a scan's
request does not abort the scan, while `sectorflow abort` during the scan still does. A real kvstore,
4 producer daemons (no NodeGroup: the scans go to disk) and real `sectorflow acquire` / `abort`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from producer_support import SMALL_DETECTOR, START_S, small_receivers, start_kvstore
from support import Processes, sectorflow_command, wait_until

from sectorflow.kvstore import Client
from sectorflow.operations.scan_account import records_of
from sectorflow.protocol import scan_prefix, wall_clock_s
from sectorflow.protocol.scan_life import ScanAbort, ScanClaim, abort_key, claim_key

ACQUIRE_S = 60.0
ODD = 4294967295


def acquire(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", "acquire", "--config", str(path), *args],
                          capture_output=True, text=True, timeout=ACQUIRE_S)


def stack(make_config, processes: Processes) -> tuple[Path, Client]:
    """A kvstore and 4 producer daemons of one thread; the test's client, all of them idle."""
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1))
    for r in range(4):
        processes.sectorflow("producer", "--config", str(server.path), "--receiver", str(r), name=f"producer{r}")
    client = Client.from_config(server.config, name="test", role="operator")
    wait_until(lambda: len(client.statuses("producer")) == 4, START_S, "4 producer threads to report idle")
    return server.path, client


def test_a_claim_of_the_last_number_does_not_end_the_numbering(make_config, processes) -> None:
    path, client = stack(make_config, processes)
    with client:
        first = acquire(path, "--scan-number", "3", "--scan-shape", "2x2")
        assert first.returncode == 0, first.stderr
        client.create_once(claim_key(ODD), ScanClaim("elsewhere:1:odd", 0.0).encode())
        wait_until(lambda: client.get(claim_key(ODD)) is not None, START_S, "the odd claim")

        for expected in (4, 5):
            result = acquire(path, "--scan-shape", "2x2")
            assert result.returncode == 0, result.stderr
            assert result.stdout.startswith(f"scan {expected}: requested 2 x 2"), result.stdout
            assert (f"scan {ODD}: claimed by elsewhere:1:odd but never requested, more than 1000 above the highest "
                    "scan acquired: left out of the numbering") in result.stderr, result.stderr
            assert "Traceback" not in result.stderr
        # The odd claim still holds its number: given with --scan-number, it is refused (exit 2), naming the next.
        taken = acquire(path, "--scan-number", str(ODD), "--scan-shape", "2x2")
        assert taken.returncode == 2 and taken.stderr.splitlines()[-1] == (
            f"sectorflow acquire: error: scan {ODD} is claimed by another acquire (elsewhere:1:odd): a scan number "
            "is used once; the next unused is 6")


def test_an_abort_before_the_request_is_ignored_and_one_during_the_scan_is_not(make_config, processes) -> None:
    path, client = stack(make_config, processes)
    with client:
        for scan in (7, 8):
            client.set_once(abort_key(scan), ScanAbort("elsewhere:1", wall_clock_s() - 60).encode())
        wait_until(lambda: all(client.get(abort_key(s)) for s in (7, 8)), START_S, "the two early aborts")

        # Scan 7 runs whole, and acquire says which abort it ignored.
        result = acquire(path, "--scan-number", "7", "--scan-shape", "2x2", "--wait", "--timeout", "30")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "scan 7: on disk, not counted: 16 on disk + 0 missing = 16 sectors" in result.stdout, result.stdout
        assert re.search(r"scan 7: an abort by elsewhere:1 at \S+ \S+ UTC was in the kvstore before the scan was "
                         r"requested: ignored and erased", result.stderr), result.stderr
        records = records_of(client.subtree(scan_prefix(7)), 7)
        assert records.abort is None and all(p.state == "finished" for p in records.producers.values())

        # Scan 8, slow (100 frames at 4 Hz), had an early abort too; 'sectorflow abort' during it stops it.
        waiting = processes.sectorflow("acquire", "--config", str(path), "--scan-number", "8", "--scan-shape",
                                       "10x10", "--rate", "4", "--wait", name="acquire8")

        def written() -> int:
            return sum(p.spilled for p in records_of(client.subtree(scan_prefix(8)), 8).producers.values())

        wait_until(lambda: written() >= 8, START_S, "scan 8 under way")
        aborted = sectorflow_command("abort", "--config", str(path), "8", timeout_s=60)
        assert aborted.returncode == 0, aborted.stderr
        wait_until(lambda: waiting.poll() is not None, START_S, "acquire --wait of scan 8 to end")
        out = processes.output(waiting)
        assert waiting.returncode == 4, out
        assert re.search(r"^scan 8: aborted: ", out, re.MULTILINE), out
        assert "scan 8: an abort by elsewhere:1" in out and "ignored and erased" in out, out
        records = records_of(client.subtree(scan_prefix(8)), 8)
        assert records.abort is not None and records.abort.by != "elsewhere:1"
        assert all("aborted" in p.error for p in records.producers.values()), records.producers
