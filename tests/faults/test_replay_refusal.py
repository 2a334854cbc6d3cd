"""A replay is safe: ``sectorflow acquire --replay`` of a scan with nothing to replay, or into NodeGroups
that counted it already, is refused at once in one line, before it writes anything. The scan's records
(byte for byte) and its file (SHA-256) stay as they were, with the NodeGroup job that counted the scan
running and after a new job took its place (a replay of a counted scan once waited forever in the first
case, and in the second recorded the good scan "failed, no file").

Prints its row of the fault table (``pytest tests/faults -s``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from beamline import RANKS, Beamline

from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration.stack import stack_services
from sectorflow.protocol import ACQUIRE_REQUEST_KEY, scan_prefix
from sectorflow.protocol.scan_summary import SUMMARY_PART
from sectorflow.waiting import wait_until

pytestmark = pytest.mark.mpi

SHAPE, SECTORS = "4x4", 64
FOLD_S = 60.0
# A refusal needs the replica (one snapshot) and nothing else: well under this on a loaded machine.
AT_ONCE_S = 30.0


def folded(client: Client, scan: int) -> dict[str, bytes]:
    """The scan's keys once the kvstore folded them into its summary (they change no more by themselves)."""
    prefix = scan_prefix(scan)

    def summary_alone() -> dict[str, bytes] | None:
        keys = client.subtree(prefix)
        return keys if set(keys) == {prefix + SUMMARY_PART} else None

    return wait_until(summary_alone, FOLD_S, f"scan {scan}'s records folded")


def refused(line: Beamline, scan: int, *extra: str) -> tuple[int, str, float]:
    """``acquire --wait`` of ``scan`` that must end at once: its exit code, its last line, its seconds."""
    started = time.monotonic()
    process = line.acquire(scan, SHAPE, 0.0, *extra)
    output, _ = process.communicate(timeout=AT_ONCE_S)
    seconds = time.monotonic() - started
    assert "Traceback" not in output and f"scan {scan}: requested" not in output, output
    return process.returncode, output.strip().splitlines()[-1], seconds


def test_a_replay_with_nothing_to_replay_or_nobody_to_count_it_is_refused_and_changes_nothing(beamline) -> None:
    line = beamline()
    supervisor = line.start(with_nodegroups=False)
    # Scan 1 to raw files; receiver 2's go, so that its replay ends incomplete, its raw files kept.
    on_disk = Beamline.finish(line.acquire(1, SHAPE, 0.0))
    assert (on_disk.outcome, on_disk.on_disk) == ("on disk, not counted", SECTORS), on_disk.output
    for path in line.raw_dir.glob("*module2*"):
        path.unlink()
    supervisor.start(next(spec for spec in stack_services(line.config, RANKS, line.output_dir, with_nodegroups=True)
                          if spec.name == "nodegroups"))
    seconds: list[float] = []
    with Client.from_config(line.config, name="fault-test") as client:
        wait_until(lambda: len(client.nodegroups()) == RANKS, 60, "the NodeGroups")
        job = {record.uid for record in client.nodegroups()}
        replayed = Beamline.finish(line.acquire(1, SHAPE, 0.0, "--replay"))
        assert (replayed.outcome, replayed.counted, replayed.missing) == ("incomplete", 48, 16), replayed.output
        counted = Beamline.finish(line.acquire(2, SHAPE, 0.0))
        assert (counted.outcome, counted.exit_code, counted.counted) == ("complete", 0, SECTORS), counted.output
        before = {scan: folded(client, scan) for scan in (1, 2)}
        request, files = client.get(ACQUIRE_REQUEST_KEY), line.checksums()

        # Scan 2 was counted complete: nothing to replay (exit 2, a bad --scan-number for --replay).
        code, last, took = refused(line, 2, "--replay")
        assert (code, last) == (2, f"sectorflow acquire: error: scan 2 was counted complete into {counted.path}: "
                                   "nothing to replay (--replay streams the raw files of a scan that was spilled or "
                                   "written to disk)")
        seconds.append(took)
        # Scan 9 was never acquired: no raw file anywhere.
        code, last, took = refused(line, 9, "--replay")
        assert (code, last) == (2, "sectorflow acquire: error: scan 9 has no raw files to replay: no producer record of "
                                   "it says a receiver spilled or wrote it to disk, and "
                                   f"{line.raw_dir} ([producer] fallback_dir) on this host holds none")
        seconds.append(took)
        # Scan 1 has raw files, but the running job counted it and would refuse another count.
        code, last, took = refused(line, 1, "--replay")
        assert code == 1 and last.startswith(f"sectorflow acquire: error: scan 1: NodeGroups {', '.join(sorted(job))} "
                                             "counted it already and refuse another count"), last
        seconds.append(took)
        # A used number's refusal (a bad argument: exit 2) names --replay only for the scan a replay would take.
        code, last, _ = refused(line, 2)
        assert (code, last) == (2, f"sectorflow acquire: error: scan 2 was acquired before (outcome complete: "
                                   f"{counted.path}): a scan number is used once; the next unused is 3")
        code, last, _ = refused(line, 1)
        assert code == 2 and last.endswith("the next unused is 3, and --replay streams scan 1's raw files again"), last

        # A new job (it finds scan 2's file on disk and would once have recorded the scan failed).
        line.restart("nodegroups", kill=False)
        wait_until(lambda: len({r.uid for r in client.nodegroups()} - job) == RANKS, 60, "the next job's NodeGroups")
        code, last, took = refused(line, 2, "--replay")
        assert code == 2 and "scan 2 was counted complete" in last, last
        seconds.append(took)
        assert client.get(ACQUIRE_REQUEST_KEY) == request
        assert line.checksums() == files

        # The next scan: whatever a refused acquire could have written would be in by its end.
        after = Beamline.finish(line.acquire(3, SHAPE, 0.0))
        assert (after.outcome, after.exit_code) == ("complete", 0), after.output
        assert {scan: folded(client, scan) for scan in (1, 2)} == before
    assert {k: v for k, v in line.checksums().items() if k in files} == files
    assert sorted(p.name for p in line.output_dir.iterdir()) == sorted(
        {Path(p).name for p in files if Path(p).parent == line.output_dir} | {scan_file_name(3)})
    print(f"| replay of a counted scan, of a scan with no raw files, into the job that counted it | {SECTORS} | - | "
          f"- | - | - | refused in {min(seconds):.1f} to {max(seconds):.1f} s, records and files unchanged | 2, 2, 1 |")
