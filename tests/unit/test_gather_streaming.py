"""Rank 0 writes each part of a scan into the scan's file as it comes and keeps none of its events;
a part another rank sends comes in pieces of bounded size; a file that cannot be
finished is written again from its frames read back; the event datasets' compression keeps
the file readable by stempy and h5py with the same events."""

from __future__ import annotations

import errno
from dataclasses import replace

import h5py
import numpy as np
import pytest
import stempy.io as stio
from test_gather import EVEN, FRAME, ODD, RECEIVERS, SCAN, SCAN_X, SCAN_Y, gatherer, part

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.consumer.counting.counted_file_writer import CountedFileWriter
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.consumer.nodegroup.gather import IN_FILE, GroupResult, ScanGatherer, Unchanged


def crowded(uid: str, positions: list[int], per_frame: int = 5):
    """A part whose position p has the events p, p + 8, ... (``per_frame`` of them, ascending, below 64)."""
    frames = [np.arange(p, p + 8 * per_frame, 8, dtype=np.uint32) for p in positions]
    base = part(uid, positions)
    return replace(base, events=np.concatenate(frames),
                   offsets=np.arange(0, per_frame * len(positions) + 1, per_frame, dtype=np.uint64))


def expected_events(per_frame: int = 5) -> list[list[int]]:
    return [list(range(p, p + 8 * per_frame, 8)) for p in range(SCAN_X * SCAN_Y)]


def partials(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".partial"))


def test_each_part_goes_into_the_scans_file_as_it_comes_and_rank_0_keeps_none_of_its_events(tmp_path):
    g = gatherer(tmp_path)
    a = crowded("ng-a", EVEN)
    g.add(a)
    assert a.events is IN_FILE and len(a.positions) == len(EVEN)  # the account stays, the events are the file's
    assert len(partials(tmp_path)) == 1 and not (tmp_path / scan_file_name(SCAN)).exists()
    b = crowded("ng-b", ODD)
    g.add(b)
    assert b.events is IN_FILE
    record = g.write(SCAN)
    assert (record.outcome, record.frames_written, record.sectors_counted) == ("complete", 8, [8, 8])
    assert [list(map(int, e)) for e in read_counted_scan(record.path).events] == expected_events()
    assert partials(tmp_path) == []


def test_a_part_in_pieces_is_written_piece_by_piece_and_reported_once_its_last_piece_came(tmp_path):
    g = gatherer(tmp_path)
    b = crowded("ng-b", ODD, per_frame=5)
    b.incomplete = {3: [1], 7: [0]}
    pieces = b.split(max_events=7)  # one frame (5 events) a piece: a frame is never cut
    assert [len(p.positions) for p in pieces] == [1, 1, 1, 1] and [p.piece for p in pieces] == [0, 1, 2, 3]
    assert [p.incomplete for p in pieces] == [{}, {3: [1]}, {}, {7: [0]}]
    assert [len(p.positions) for p in crowded("ng-b", ODD).split(max_events=10)] == [2, 2]
    g.add(crowded("ng-a", EVEN))
    for piece in pieces[:-1]:
        g.add(piece)
        assert piece.events is IN_FILE
        assert g.ready() == []  # ng-b has not reported until its last piece
    g.add(pieces[-1])
    assert g.ready() == [SCAN]
    record = g.write(SCAN)
    assert (record.outcome, record.frames_written, record.sectors_counted) == ("incomplete", 8, [7, 7])
    scan = read_counted_scan(record.path)
    assert [list(map(int, e)) for e in scan.events] == expected_events()
    assert list(scan.incomplete_positions) == [3, 7]


def test_the_pieces_of_a_part_that_never_finished_are_left_out_of_the_file(tmp_path):
    g = gatherer(tmp_path)
    g.add(crowded("ng-a", EVEN))
    g.add(crowded("ng-b", ODD).split(max_events=5)[0])  # position 1 only; the rank stopped sending
    record = g.write(SCAN, final=True)
    assert record.outcome == "incomplete" and "NodeGroups ng-b never reported" in record.reason
    scan = read_counted_scan(record.path)
    assert list(scan.missing_positions) == ODD and len(scan.events[1]) == 0
    assert partials(tmp_path) == []


def test_a_streamed_file_that_cannot_be_finished_is_written_again_from_its_frames(tmp_path, monkeypatch):
    def full_disk(self, **_):
        raise OSError(errno.ENOSPC, "No space left on device")

    g = gatherer(tmp_path)
    g.add(crowded("ng-a", EVEN))
    g.add(crowded("ng-b", ODD))
    monkeypatch.setattr(CountedFileWriter, "finish", full_disk)
    record = g.write(SCAN)
    assert record.outcome == "complete" and record.path == str(tmp_path / scan_file_name(SCAN))
    assert [list(map(int, e)) for e in read_counted_scan(record.path).events] == expected_events()
    assert partials(tmp_path) == []


def test_parts_that_cannot_go_into_a_file_as_they_come_wait_in_memory_and_are_written_later(tmp_path):
    missing_dir = tmp_path / "later"  # not there yet: no file can be opened when the parts come
    g = gatherer(missing_dir, create=False, write_retry_s=3600.0)
    a = crowded("ng-a", EVEN)
    g.add(a)
    g.add(crowded("ng-b", ODD))
    assert a.events is not IN_FILE and len(a.events) == 20
    missing_dir.mkdir()
    record = g.write(SCAN)
    assert [list(map(int, e)) for e in read_counted_scan(record.path).events] == expected_events()


@pytest.mark.parametrize("compression", ["none", "deflate"])
def test_a_compressed_file_opens_in_stempy_and_h5py_with_the_same_events(tmp_path, compression):
    g = gatherer(tmp_path, compression=compression)
    g.add(crowded("ng-a", EVEN))
    g.add(crowded("ng-b", ODD))
    record = g.write(SCAN)
    expected = expected_events()
    with h5py.File(record.path, "r") as f:
        frames = f["electron_events/frames"]
        assert frames.compression == (None if compression == "none" else "gzip")
        assert frames.shuffle == (compression == "deflate")
        assert [list(map(int, e)) for e in frames[()]] == expected
    loaded = stio.load_electron_counts(record.path)
    assert tuple(loaded.scan_shape) == (SCAN_Y, SCAN_X)
    assert [list(map(int, loaded.data[p, 0])) for p in range(SCAN_X * SCAN_Y)] == expected


def during_scan(piece: GroupResult, number: int) -> GroupResult:
    """``piece`` as a piece of frames counted while the scan runs (LocalGroup.take_counted): no
    account, the part's number of pieces not known yet."""
    return replace(piece, piece=number, pieces=0, routing=[], expected=[], received=[], counts={}, sums={})


def test_pieces_counted_while_the_scan_runs_go_into_the_file_before_the_part_ends(tmp_path):
    # ng-b's frames at 1 and 3 come while the scan runs, before any part is whole (gather_timeout 0:
    # a wait counted from a piece would write the scan at once); its last piece brings 5, 7 and the account.
    g = ScanGatherer(["ng-a", "ng-b"], tmp_path, FRAME, gather_timeout_s=0.0, receivers=RECEIVERS)
    b = crowded("ng-b", ODD)
    b.incomplete = {3: [1]}
    b.sums = {"diffraction": np.ones(4, dtype=np.uint64)}
    first, second, rest = b.split(max_events=5)[0], b.split(max_events=5)[1], b.split(max_events=10)[1]
    for k, piece in enumerate([first, second]):
        piece = during_scan(piece, k)
        g.add(piece)
        assert piece.events is IN_FILE and not piece.last
        assert g.ready() == []  # no part is whole: the scan runs
    last = replace(rest, piece=2, pieces=3)
    assert last.last and last.sums
    g.add(last)
    assert last.events is IN_FILE
    g.add(crowded("ng-a", EVEN))
    assert g.ready() == [SCAN]
    record = g.write(SCAN)
    assert (record.outcome, record.frames_written, record.sectors_counted) == ("incomplete", 8, [8, 7])
    scan = read_counted_scan(record.path)
    assert [list(map(int, e)) for e in scan.events] == expected_events()
    assert list(scan.incomplete_positions) == [3]


def test_a_piece_split_while_the_scan_runs_keeps_its_number_of_pieces_unknown():
    b = crowded("ng-b", ODD)
    pieces = during_scan(b, 4).split(max_events=5)
    assert [(p.piece, p.pieces, p.last) for p in pieces] == [(4, 0, False), (5, 0, False), (6, 0, False),
                                                              (7, 0, False)]
    tail = replace(b, piece=3, pieces=4).split(max_events=10)  # a part's last piece, split on: still last
    assert [(p.piece, p.pieces, p.last) for p in tail] == [(3, 5, False), (4, 5, True)]


def test_a_part_whose_last_piece_has_no_frames_keeps_the_per_position_outputs_of_its_earlier_pieces():
    b = crowded("ng-b", ODD)
    b.images = {"com_x": np.arange(4, dtype=np.float32)}
    earlier = during_scan(b, 0)
    last = replace(b, positions=b.positions[:0], events=b.events[:0], offsets=np.zeros(1, dtype=np.uint64),
                   incomplete={}, images={}, piece=1, pieces=2)
    joined = earlier.joined(last)
    assert list(joined.positions) == ODD and joined.last and joined.counts == b.counts
    assert joined.images["com_x"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_only_pieces_of_parts_that_stopped_mid_scan_write_nothing_and_record_nothing(tmp_path):
    g = gatherer(tmp_path)
    g.add(during_scan(crowded("ng-b", ODD), 0))  # the rank stopped before the scan ended
    assert g.ready() == [] and g.ready(flush=True) == [SCAN]
    assert isinstance(g.write(SCAN, final=True), Unchanged)
    assert list(tmp_path.iterdir()) == []  # its streamed file is gone too
