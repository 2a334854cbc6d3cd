"""consumer/counting/nexus_events.py: the counted file's NXevent_data, read back by scippnexus and h5py into the
events of /electron_events, with missing positions, a scan without events, and the instrument."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import scippnexus
import stempy.io

from sectorflow.consumer.counting import read_counted_scan, write_counted_scan
from sectorflow.consumer.counting.nexus_events import read_nexus_events, write_nexus_events

FRAME = (16, 12)
INSTRUMENT = {
    "beam_energy": {"value": 300.0, "units": "keV", "source": "configuration"},
    "detector_pixel": {"value": 10.0, "units": "um", "source": "acquire"},
    "convergence": {"value": 25.0, "units": "mrad", "source": "acquire"},
}


def some_events(positions: int, seed: int = 3) -> list[np.ndarray | None]:
    rng = np.random.default_rng(seed)
    return [np.unique(rng.integers(0, FRAME[0] * FRAME[1], rng.integers(0, 9))).astype(np.uint32)
            for _ in range(positions)]


def scippnexus_events(path: Path) -> list[np.ndarray]:
    events = scippnexus.load(path, root="entry/events")
    return [np.asarray(events.values[p].coords["event_id"].values, dtype=np.uint32) for p in range(events.shape[0])]


def test_the_nexus_events_are_the_stempy_layouts_events_with_a_missing_position_empty(tmp_path: Path) -> None:
    events = some_events(20)
    events[5] = None
    path = write_counted_scan(tmp_path / "a.h5", events, scan_shape=(4, 5), frame_shape=FRAME,
                              metadata={"instrument": INSTRUMENT})
    expected = read_counted_scan(path).events
    assert len(expected[5]) == 0
    for theirs in (scippnexus_events(path), read_nexus_events(h5py.File(path, "r"))):
        assert [e.tolist() for e in theirs] == [e.tolist() for e in expected]
    stempy.io.load_electron_counts(str(path))  # stempy opens it unchanged
    with h5py.File(path, "r") as f:
        group = f["entry/events"]
        assert group["scan_row"][7] == 1 and group["scan_col"][7] == 2
        assert "data" not in f["entry"] and "default" not in f["entry"].attrs  # no virtual images to show


def test_the_instrument_quantities_carry_their_units_and_the_standard_ones_their_nexus_names(tmp_path: Path) -> None:
    path = write_counted_scan(tmp_path / "a.h5", some_events(6), scan_shape=(2, 3), frame_shape=FRAME,
                              metadata={"instrument": INSTRUMENT})
    instrument = scippnexus.load(path, root="entry/instrument")
    assert instrument["convergence"].value == 25.0 and str(instrument["convergence"].unit) == "mrad"
    assert instrument["beam"]["incident_energy"].value == 300.0
    assert instrument["detector"]["x_pixel_size"].value == 10.0 and str(instrument["detector"]["x_pixel_size"].unit) == "µm"
    with h5py.File(path, "r") as f:
        assert f["entry/instrument/convergence"].attrs["source"] == "acquire"
        assert f["entry/instrument/detector/events"] == f["entry/events"]  # a link, not a copy


def test_a_scan_without_events_has_empty_nexus_events(tmp_path: Path) -> None:
    empty = [np.zeros(0, dtype=np.uint32)] * 6
    path = write_counted_scan(tmp_path / "a.h5", empty, scan_shape=(2, 3), frame_shape=FRAME)
    assert [len(e) for e in scippnexus_events(path)] == [0] * 6


def test_the_events_are_written_from_the_files_own_frames_dataset_block_by_block(tmp_path: Path) -> None:
    events = some_events(50, seed=9)
    path = write_counted_scan(tmp_path / "a.h5", events, scan_shape=(5, 10), frame_shape=FRAME)
    with h5py.File(path, "r") as source, h5py.File(tmp_path / "b.h5", "w") as target:
        write_nexus_events(target, source["electron_events/frames"], scan_shape=(5, 10), frame_shape=FRAME)
    with h5py.File(tmp_path / "b.h5", "r") as f:
        assert [e.tolist() for e in read_nexus_events(f)] == [e.tolist() for e in events]


def test_event_id_takes_the_files_compression_and_still_reads_back(tmp_path: Path) -> None:
    events = some_events(30, seed=4)
    path = write_counted_scan(tmp_path / "a.h5", events, scan_shape=(5, 6), frame_shape=FRAME, compression="deflate")
    with h5py.File(path, "r") as f:
        assert f["entry/events/event_id"].compression == "gzip" and f["entry/events/event_id"].shuffle
    assert [e.tolist() for e in scippnexus_events(path)] == [e.tolist() for e in events]
