"""The counted-scan file: stempy 3.6.0 opens it and sees the same SparseArray as its own save of
the same events; missing positions and incomplete frames are recorded, never hidden."""

from __future__ import annotations

import grp
import os
import stat

import h5py
import numpy as np
import pytest
import stempy.io as stio
from counting_frames import simulated_frames

from sectorflow.consumer.counting import (
    FILE_VERSION,
    Counter,
    CountingError,
    calculate_thresholds,
    read_counted_scan,
    write_counted_scan,
)
from sectorflow.errors import SectorflowError

SCAN = (3, 4)  # rows x cols of probe positions: not square, so swapped axes would show
FRAME = (24, 40)


def counted_events(electrons_per_frame=12, seed=0):
    frames = simulated_frames(SCAN[0] * SCAN[1], FRAME, electrons_per_frame=electrons_per_frame, seed=seed)
    statistics = calculate_thresholds(frames[:4], background_threshold_n_sigma=4.5, x_ray_threshold_n_sigma=175.0)
    events = Counter.from_thresholds(statistics, FRAME).count_batch(frames)
    return events, statistics


def stempy_save(path, events):
    data = np.empty((len(events), 1), dtype=object)
    for i, e in enumerate(events):
        data[i, 0] = np.asarray(e, dtype=np.uint32)
    stio.save_electron_counts(str(path), stio.SparseArray(data=data, scan_shape=SCAN, frame_shape=FRAME))


def assert_same_sparse_array(ours, theirs):
    assert tuple(ours.scan_shape) == tuple(theirs.scan_shape) == SCAN
    assert tuple(ours.frame_shape) == tuple(theirs.frame_shape) == FRAME
    assert ours.data.shape == theirs.data.shape
    for position in range(ours.data.shape[0]):
        np.testing.assert_array_equal(ours.data[position, 0], theirs.data[position, 0], err_msg=f"position {position}")
    np.testing.assert_array_equal(ours.to_dense(), theirs.to_dense())


def test_stempy_loads_the_same_sparse_array_as_its_own_save(tmp_path):
    events, statistics = counted_events()
    assert len({len(e) for e in events}) > 1  # stempy's own save needs unequal lengths
    write_counted_scan(tmp_path / "ours.h5", events, scan_shape=SCAN, frame_shape=FRAME, statistics=statistics)
    stempy_save(tmp_path / "stempy.h5", events)

    ours = stio.load_electron_counts(str(tmp_path / "ours.h5"))
    assert_same_sparse_array(ours, stio.load_electron_counts(str(tmp_path / "stempy.h5")))
    counting = ours.metadata["electron_counting"]
    assert counting["background_threshold"] == statistics.background_threshold
    assert counting["optimized_std_dev"] == statistics.optimized_std_dev
    assert counting["number_of_samples"] == 4
    assert ours.metadata["completeness"]["complete"]


def test_file_layout_matches_stempy_attributes(tmp_path):
    events, _ = counted_events()
    write_counted_scan(tmp_path / "ours.h5", events, scan_shape=SCAN, frame_shape=FRAME)
    stempy_save(tmp_path / "stempy.h5", events)
    with h5py.File(tmp_path / "ours.h5", "r") as ours, h5py.File(tmp_path / "stempy.h5", "r") as theirs:
        assert ours.attrs["version"] == theirs.attrs["version"] == FILE_VERSION
        for name in ("electron_events/frames", "electron_events/scan_positions"):
            assert dict(ours[name].attrs) == dict(theirs[name].attrs), name
            assert ours[name].dtype == theirs[name].dtype, name
        np.testing.assert_array_equal(ours["electron_events/scan_positions"][()],
                                      theirs["electron_events/scan_positions"][()])
    # The meaning, as stempy 3.6.0 writes it: frames Nx/Ny = frame rows/cols, scan Nx/Ny = scan cols/rows.
    with h5py.File(tmp_path / "ours.h5", "r") as f:
        assert (f["electron_events/frames"].attrs["Nx"], f["electron_events/frames"].attrs["Ny"]) == FRAME
        scan = f["electron_events/scan_positions"]
        assert (scan.attrs["Ny"], scan.attrs["Nx"]) == SCAN


def test_equal_event_counts_are_written(tmp_path):
    # stempy's own save fails here (numpy makes the events a 2-D array); ours must not.
    events = [np.array([i, i + 5], dtype=np.uint32) for i in range(SCAN[0] * SCAN[1])]
    write_counted_scan(tmp_path / "equal.h5", events, scan_shape=SCAN, frame_shape=FRAME)
    loaded = stio.load_electron_counts(str(tmp_path / "equal.h5"))
    for position, expected in enumerate(events):
        np.testing.assert_array_equal(loaded.data[position, 0], expected)


def test_missing_and_incomplete_positions_are_recorded(tmp_path):
    events, statistics = counted_events(seed=3)
    events[5] = None
    events[11] = None
    counter = Counter(FRAME, background_threshold=statistics.background_threshold, dark_reference=np.zeros(FRAME),
                      row_dark="median", optimized_mean=statistics.optimized_mean)
    write_counted_scan(tmp_path / "scan.h5", events, scan_shape=SCAN, frame_shape=FRAME, statistics=statistics,
                       incomplete={7: [2], 0: [1, 3]}, counting=counter.metadata, metadata={"scan": {"number": 17}})

    loaded = stio.load_electron_counts(str(tmp_path / "scan.h5"))
    assert loaded.data[5, 0].size == 0 and loaded.data[11, 0].size == 0
    completeness = loaded.metadata["completeness"]
    assert completeness["positions"] == 12
    assert completeness["missing_positions"] == 2
    assert completeness["incomplete_frames"] == 2
    assert not completeness["complete"]
    counting = loaded.metadata["electron_counting"]
    assert counting["row_dark"] == "median"
    assert counting["row_dark_level"] == statistics.optimized_mean
    assert counting["dark_reference_applied"] and not counting["gain_applied"]
    assert loaded.metadata["scan"]["number"] == 17

    scan = read_counted_scan(tmp_path / "scan.h5")
    assert scan.missing_positions.tolist() == [5, 11]
    assert scan.incomplete_positions.tolist() == [0, 7]
    assert [s.tolist() for s in scan.incomplete_missing_sectors] == [[1, 3], [2]]
    assert scan.scan_shape == SCAN and scan.frame_shape == FRAME
    assert scan.statistics["background_threshold"] == statistics.background_threshold
    for position, expected in enumerate(events):
        np.testing.assert_array_equal(scan.events[position], expected if expected is not None else [])


def test_full_frames_round_trip_through_stempy(tmp_path):
    frames = simulated_frames(4, (576, 576), electrons_per_frame=300, seed=21)
    counter = Counter((576, 576), background_threshold=30.4, x_ray_threshold=420.0, threads=2)
    events = counter.count_batch(frames)
    write_counted_scan(tmp_path / "full.h5", events, scan_shape=(2, 2), frame_shape=(576, 576))
    loaded = stio.load_electron_counts(str(tmp_path / "full.h5"))
    assert loaded.shape == (2, 2, 576, 576)
    for position in range(4):
        np.testing.assert_array_equal(loaded.data[position, 0], events[position])


def test_file_appears_only_when_complete(tmp_path):
    events, _ = counted_events()
    target = tmp_path / "scan.h5"
    write_counted_scan(target, events, scan_shape=SCAN, frame_shape=FRAME)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.h5"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: e[:-1], r"events has 11 entries, expected one per probe position \(3 x 4 = 12\)"),
        (lambda e: [np.array([5, 3])] + e[1:], "events of position 0 must be ascending flat pixel indices below 960"),
        (lambda e: [np.array([960])] + e[1:], "events of position 0 must be ascending flat pixel indices below 960"),
        (lambda e: [np.array([-1, 4])] + e[1:], "events of position 0 must be ascending"),
        (lambda e: e[:1] + [np.array([], np.uint32), np.array([9, 9], np.uint32)] + e[3:],
         r"events of position 2 must be ascending flat pixel indices below 960, got \[9, 9\]"),
        (lambda e: [np.array([[1, 2]])] + e[1:], "events of position 0 must be a 1-D integer array"),
        (lambda e: [np.array([1.5])] + e[1:], "events of position 0 must be a 1-D integer array"),
    ],
)
def test_bad_events_are_clear_errors(tmp_path, change, message):
    events, _ = counted_events()
    with pytest.raises(CountingError, match=message):
        write_counted_scan(tmp_path / "bad.h5", change(list(events)), scan_shape=SCAN, frame_shape=FRAME)
    assert not (tmp_path / "bad.h5").exists()


def test_bad_incomplete_positions_are_clear_errors(tmp_path):
    events, _ = counted_events()
    with pytest.raises(CountingError, match="incomplete position 12 is outside the scan of 12 positions"):
        write_counted_scan(tmp_path / "bad.h5", events, scan_shape=SCAN, frame_shape=FRAME, incomplete=[12])
    events[3] = None
    with pytest.raises(CountingError, match="position 3 is listed both as missing"):
        write_counted_scan(tmp_path / "bad.h5", events, scan_shape=SCAN, frame_shape=FRAME, incomplete=[3])


def test_reading_a_file_without_the_layout_names_it(tmp_path):
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.create_dataset("frames", data=np.zeros(3))
    with pytest.raises(SectorflowError, match="other.h5: not a counted scan in stempy's layout"):
        read_counted_scan(tmp_path / "other.h5")


def test_an_existing_file_is_never_replaced(tmp_path):
    events, _ = counted_events()
    target = tmp_path / "scan.h5"
    write_counted_scan(target, events, scan_shape=SCAN, frame_shape=FRAME)
    before = target.read_bytes()
    worse = [None] * len(events)
    with pytest.raises(FileExistsError, match="scan.h5 exists; a counted file is never replaced"):
        write_counted_scan(target, worse, scan_shape=SCAN, frame_shape=FRAME)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.h5"]  # no temporary file left


def test_the_outcome_and_its_reason_are_in_the_file_stempy_still_opens(tmp_path):
    events, _ = counted_events()
    events[5] = None
    write_counted_scan(tmp_path / "scan.h5", events, scan_shape=SCAN, frame_shape=FRAME,
                       reason="1 position missing")
    completeness = stio.load_electron_counts(str(tmp_path / "scan.h5")).metadata["completeness"]
    assert (completeness["outcome"], completeness["reason"]) == ("incomplete", "1 position missing")
    assert list(read_counted_scan(tmp_path / "scan.h5").missing_positions) == [5]
    # A writer that knows more is missing than the file shows says so; complete cannot be claimed
    # for a file with holes.
    whole, _ = counted_events()
    write_counted_scan(tmp_path / "known.h5", whole, scan_shape=SCAN, frame_shape=FRAME, outcome="incomplete",
                       reason="NodeGroup ng-b never reported")
    assert read_counted_scan(tmp_path / "known.h5").metadata["completeness"]["outcome"] == "incomplete"
    with pytest.raises(CountingError, match="outcome 'complete'"):
        write_counted_scan(tmp_path / "claim.h5", events, scan_shape=SCAN, frame_shape=FRAME, outcome="complete")


def test_a_file_follows_the_umask_unless_a_mode_and_group_are_given(tmp_path):
    events, _ = counted_events()
    previous = os.umask(0o027)
    try:
        umasked = write_counted_scan(tmp_path / "umask.h5", events, scan_shape=SCAN, frame_shape=FRAME)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(umasked.stat().st_mode) == 0o640  # 0666 less the umask, as any file (was 0600)
    group = grp.getgrnam("nogroup").gr_gid if os.geteuid() == 0 else os.getegid()
    given = write_counted_scan(tmp_path / "given.h5", events, scan_shape=SCAN, frame_shape=FRAME, mode=0o604,
                               group=group)
    assert stat.S_IMODE(given.stat().st_mode) == 0o604 and given.stat().st_gid == group
    assert sorted(p.name for p in tmp_path.iterdir()) == ["given.h5", "umask.h5"]  # no partial file left


def test_a_deflate_compressed_file_opens_in_stempy_and_h5py_with_the_same_events(tmp_path):
    events, statistics = counted_events()
    write_counted_scan(tmp_path / "deflate.h5", events, scan_shape=SCAN, frame_shape=FRAME, statistics=statistics,
                       compression="deflate")
    with h5py.File(tmp_path / "deflate.h5", "r") as f:
        frames = f["electron_events/frames"]
        assert (frames.compression, frames.shuffle) == ("gzip", True)
        for position, stored in enumerate(frames[()]):
            np.testing.assert_array_equal(stored, events[position])
    stempy_save(tmp_path / "stempy.h5", events)
    assert_same_sparse_array(stio.load_electron_counts(str(tmp_path / "deflate.h5")),
                             stio.load_electron_counts(str(tmp_path / "stempy.h5")))


def test_an_unknown_compression_is_refused_with_the_known_ones_and_nothing_written(tmp_path):
    events, _ = counted_events()
    with pytest.raises(CountingError, match="compression 'zstd' is not one of 'none', 'deflate'"):
        write_counted_scan(tmp_path / "zstd.h5", events, scan_shape=SCAN, frame_shape=FRAME, compression="zstd")
    assert list(tmp_path.iterdir()) == []
