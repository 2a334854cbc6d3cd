"""Rank 0's gathering: every write ends in a file record (complete, incomplete, failed) whose
counts match the file; a file is never replaced: a later part is merged into a new file or written
beside it, known across restarts; a failed write is retried, goes to the second directory, or
fails with the reason and nothing under the final name."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np
import stempy.io as stio

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.consumer.nodegroup import GroupResult, ScanGatherer, gather, scan_file_name
from sectorflow.consumer.nodegroup.gather import Unchanged

FRAME = (8, 8)
RECEIVERS = 2
SCAN = 3
SCAN_X, SCAN_Y = 4, 2
ROUTING = ["ng-a", "ng-b"]


def part(uid: str, positions: list[int], incomplete: dict[int, list[int]] | None = None,
         routing: list[str] = ROUTING) -> GroupResult:
    """A NodeGroup's part: position p has the single event p (a pixel index below 64)."""
    events = np.arange(len(positions), dtype=np.uint32)
    events[:] = positions
    incomplete = incomplete or {}
    counted = [len(positions) - sum(1 for s in incomplete.values() if r in s) for r in range(RECEIVERS)]
    return GroupResult(
        uid=uid, rank=0, host="127.0.0.1", scan_number=SCAN, scan_x=SCAN_X, scan_y=SCAN_Y, routing=routing,
        positions=np.asarray(positions, dtype=np.uint64), events=events,
        offsets=np.arange(len(positions) + 1, dtype=np.uint64), incomplete=incomplete, thresholds_known=False,
        statistics={}, threshold_error="", expected=[len(positions)] * RECEIVERS, received=counted,
        timed_out=False, bytes=0,
        counts={"frames_complete": len(positions) - len(incomplete), "frames_incomplete": len(incomplete),
                "uncounted_frames": 0, "late_messages": 0, "duplicate_sectors": 0, "evicted_frames": 0},
        sectors_counted=counted,
    )


def gatherer(output: Path, create: bool = True, **options) -> ScanGatherer:
    if create:  # the service checks and creates it at start-up
        output.mkdir(exist_ok=True)
    return ScanGatherer(ROUTING, output, FRAME, gather_timeout_s=3600.0, receivers=RECEIVERS, **options)


EVEN, ODD = [0, 2, 4, 6], [1, 3, 5, 7]


def test_a_whole_scan_is_complete_and_its_record_counts_every_receivers_sectors(tmp_path):
    g = gatherer(tmp_path)
    g.add(part("ng-a", EVEN))
    assert g.ready() == []  # waits for ng-b
    g.add(part("ng-b", ODD, incomplete={3: [1]}))
    assert g.ready() == [SCAN]
    record = g.write(SCAN)
    assert (record.outcome, record.path, record.extra_paths) == ("incomplete", str(tmp_path / scan_file_name(SCAN)), [])
    assert (record.positions, record.frames_written, record.positions_missing) == (8, 8, 0)
    assert record.sectors_counted == [8, 7] and record.reason == "1 frames incomplete"
    assert stio.load_electron_counts(record.path).metadata["completeness"]["outcome"] == "incomplete"

    whole = gatherer(tmp_path / "whole")
    whole.add(part("ng-a", EVEN))
    whole.add(part("ng-b", ODD))
    record = whole.write(SCAN)
    assert (record.outcome, record.reason, record.sectors_counted) == ("complete", "", [8, 8])


def test_a_late_part_goes_into_a_new_file_holding_the_old_ones_frames_never_over_it(tmp_path):
    g = gatherer(tmp_path)
    g.add(part("ng-a", EVEN))
    first = g.write(SCAN, final=True)  # written without ng-b (the gather timeout passed)
    assert first.outcome == "incomplete" and "NodeGroups ng-b never reported" in first.reason
    assert first.sectors_counted == [4, 4] and first.positions_missing == 4
    base = Path(first.path)
    before = base.read_bytes()

    g.add(part("ng-b", ODD))
    assert g.ready() == [SCAN]  # only ng-b was missing: whole at once
    merged = g.write(SCAN)
    assert merged.outcome == "complete" and merged.sectors_counted == [8, 8]
    assert merged.path == str(tmp_path / scan_file_name(SCAN, 2)) and merged.extra_paths == [str(base)]
    assert base.read_bytes() == before  # the old file is never touched
    scan = read_counted_scan(merged.path)
    assert [int(e[0]) for e in scan.events] == list(range(8))
    assert scan.metadata["scan"]["merged_from"] == base.name

    # A stray part of positions the file already holds: beside it, the record still names the merged file.
    g.add(part("ng-a", [0, 2]))
    stray = g.write(SCAN, final=True)
    assert stray.path == merged.path and stray.outcome == "complete"
    assert stray.extra_paths == [str(base), str(tmp_path / scan_file_name(SCAN, 3))]
    assert len(read_counted_scan(tmp_path / scan_file_name(SCAN, 3)).missing_positions) == 6

    # A new job on the same directory knows the scan was written: its part goes beside, as part 4.
    restarted = gatherer(tmp_path)
    restarted.add(part("ng-a", EVEN))
    restarted.add(part("ng-b", ODD))
    again = restarted.write(SCAN)
    assert again.path == merged.path  # nothing new to merge: the merged file stays the scan's file
    assert str(tmp_path / scan_file_name(SCAN, 4)) in again.extra_paths
    assert sorted(p.name for p in tmp_path.iterdir()) == [scan_file_name(SCAN, k) for k in (1, 2, 3, 4)]


def test_a_replay_of_spilled_sectors_joins_the_frames_the_old_file_holds_incomplete(tmp_path):
    """A frame counted without receiver 1's sector, then that sector replayed: one
    frame of both in the merged file, counted for both receivers, no part file beside it."""
    positions = list(range(8))
    g = gatherer(tmp_path)
    # Receiver 0's sector is rows 0..3 (pixels 0..31), receiver 1's rows 4..7 (32..63).
    g.add(part("ng-a", positions, incomplete={p: [1] for p in positions}, routing=["ng-a"]))
    first = g.write(SCAN)
    assert first.sectors_counted == [8, 0] and first.positions_missing == 0
    replayed = part("ng-a", positions, incomplete={p: [0] for p in positions[:6]}, routing=["ng-a"])
    # The replay's frames hold receiver 1's sector (pixel 40 + p), and at positions 6, 7 a stray event
    # in receiver 0's, which the old frame already has: only the lacking sector joins.
    events = np.concatenate([[40 + p] if p < 6 else [1, 40 + p] for p in positions]).astype(np.uint32)
    offsets = np.cumsum([0] + [1 if p < 6 else 2 for p in positions]).astype(np.uint64)
    g.add(replace(replayed, events=events, offsets=offsets))
    merged = g.write(SCAN)
    assert (merged.outcome, merged.sectors_counted) == ("complete", [8, 8]), merged.reason
    assert merged.path == str(tmp_path / scan_file_name(SCAN, 2)) and merged.extra_paths == [first.path]
    scan = read_counted_scan(merged.path)
    assert [list(map(int, e)) for e in scan.events] == [[p, 40 + p] for p in positions]
    assert len(scan.incomplete_positions) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [scan_file_name(SCAN, k) for k in (1, 2)]


def test_a_failed_write_is_retried_then_fails_with_nothing_under_the_final_name(tmp_path):
    missing_dir = tmp_path / "gone"  # does not exist: every write fails
    g = gatherer(missing_dir, create=False, write_retry_s=3600.0)
    g.add(part("ng-a", EVEN))
    g.add(part("ng-b", ODD))
    assert g.write(SCAN) is None  # kept for a retry
    assert g.ready() == []  # not before the retry is due
    retry_at = g.pending[SCAN].retry_at
    missing_dir.mkdir()
    assert g.ready(now=retry_at) == [SCAN]
    assert g.write(SCAN).outcome == "complete"

    failing = gatherer(tmp_path / "never", create=False, write_retry_s=3600.0)
    failing.add(part("ng-a", EVEN))
    failing.add(part("ng-b", ODD))
    assert failing.write(SCAN) is None
    record = failing.write(SCAN, final=True)  # the job stops: the last try
    assert record.outcome == "failed" and record.path == "" and "No such file or directory" in record.reason
    assert not failing.pending and not (tmp_path / "never").exists()


def test_a_write_the_output_directory_refuses_goes_to_the_second_one(tmp_path):
    second = tmp_path / "second"
    second.mkdir()
    g = gatherer(tmp_path / "gone", create=False, second_output_dir=second)
    g.add(part("ng-a", EVEN))
    g.add(part("ng-b", ODD))
    record = g.write(SCAN)
    assert record.outcome == "complete" and record.path == str(second / scan_file_name(SCAN))


def test_a_file_of_the_scan_that_cannot_be_read_is_kept_and_the_new_part_becomes_the_scans_file(tmp_path):
    broken = tmp_path / scan_file_name(SCAN)
    broken.write_bytes(b"not hdf5")
    g = gatherer(tmp_path)
    g.add(part("ng-a", EVEN))
    g.add(part("ng-b", ODD))
    record = g.write(SCAN)
    assert record.outcome == "complete" and record.sectors_counted == [8, 8]
    assert record.path == str(tmp_path / scan_file_name(SCAN, 2)) and record.extra_paths == [str(broken)]
    assert broken.read_bytes() == b"not hdf5"


def nothing(uid: str) -> GroupResult:
    """A NodeGroup's part of a run that brought no data message (info messages alone, then the timeout)."""
    return replace(part(uid, []), scan_x=0, scan_y=0, received=[0] * RECEIVERS, timed_out=True,
                   counts={key: 0 for key in part(uid, []).counts})


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_that_brings_no_data_leaves_a_counted_scans_record_and_file_as_they_were(tmp_path, caplog):
    first = gatherer(tmp_path)
    first.add(part("ng-a", EVEN))
    first.add(part("ng-b", ODD))
    record = first.write(SCAN)
    assert record.outcome == "complete"
    digest = sha256(Path(record.path))

    # The NodeGroups restarted (a new job on the same directory); a replay of the scan brings them nothing.
    restarted = gatherer(tmp_path)
    restarted.add(nothing("ng-a"))
    restarted.add(nothing("ng-b"))
    assert restarted.ready(flush=True) == [SCAN]
    with caplog.at_level(logging.WARNING, logger=gather.__name__):
        kept = restarted.write(SCAN, final=True)
    assert isinstance(kept, Unchanged) and not restarted.pending  # no record: the service publishes none
    why = (f"scan {SCAN}: no data message reached this job's NodeGroups (ng-a, ng-b) in this run; nothing written: "
           f"its files ({scan_file_name(SCAN)}) and its record stay as they were")
    assert kept.why == why and why in caplog.text
    assert sha256(Path(record.path)) == digest and [p.name for p in tmp_path.iterdir()] == [scan_file_name(SCAN)]

    # The job that wrote the file gets the same run: the same answer.
    first.add(nothing("ng-a"))
    first.add(nothing("ng-b"))
    assert isinstance(first.write(SCAN, final=True), Unchanged)
    assert sha256(Path(record.path)) == digest


def test_a_run_that_brings_no_data_keeps_a_failed_record_of_this_job_and_fails_a_scan_never_recorded(tmp_path):
    g = gatherer(tmp_path / "gone", create=False)  # no directory takes the file
    g.add(part("ng-a", EVEN))
    g.add(part("ng-b", ODD))
    failed = g.write(SCAN, final=True)
    assert failed.outcome == "failed" and "No such file or directory" in failed.reason
    g.add(nothing("ng-a"))
    assert isinstance(g.write(SCAN, final=True), Unchanged)  # the reason of the failure stays the record's

    fresh = gatherer(tmp_path / "fresh")
    fresh.add(nothing("ng-a"))
    fresh.add(nothing("ng-b"))
    never = fresh.write(SCAN, final=True)
    assert never.outcome == "failed" and "no data message reached this job's NodeGroups" in never.reason


def with_threshold(result: GroupResult, background: float) -> GroupResult:
    return replace(result, thresholds_known=True, statistics={"background_threshold": background,
                                                              "x_ray_threshold": 1000.0})


def test_nodegroups_whose_thresholds_straddle_an_integer_are_named_in_the_log_and_the_file(tmp_path, caplog):
    # Pixel values are integers: 29.987 and 30.026 count 30 ADU pixels differently.
    g = gatherer(tmp_path / "apart")
    g.add(with_threshold(part("ng-a", EVEN), 29.987))
    g.add(with_threshold(part("ng-b", ODD), 30.026))
    with caplog.at_level(logging.WARNING, logger="sectorflow.consumer.nodegroup.gather"):
        record = g.write(SCAN)
    assert not read_counted_scan(record.path).metadata["scan"]["background_thresholds_count_alike"]
    assert (f"scan {SCAN}: the NodeGroups' background thresholds lie on both sides of an integer ADU (ng-a 29.987, "
            "ng-b 30.026): pixels of that value are events in some NodeGroups' frames only") in caplog.text

    caplog.clear()
    alike = gatherer(tmp_path / "alike")
    alike.add(with_threshold(part("ng-a", EVEN), 29.535))
    alike.add(with_threshold(part("ng-b", ODD), 29.572))
    record = alike.write(SCAN)
    assert read_counted_scan(record.path).metadata["scan"]["background_thresholds_count_alike"]
    assert "both sides of an integer" not in caplog.text
