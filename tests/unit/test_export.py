"""consumer/counting/export.py on files the stack rarely writes: missing positions and a scan without a single
electron, read back by LiberTEM's raw_csr loader and RosettaSciIO; the region's grammar."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from libertem.api import Context
from libertem.udf.sum import SumUDF
from libertem.udf.sumsigudf import SumSigUDF
from rsciio.hspy import file_reader

from sectorflow.consumer.counting import write_counted_scan
from sectorflow.consumer.counting.export import Region, export_hspy, export_raw_csr, parse_region
from sectorflow.errors import UsageError

FRAME = (8, 6)


def libertem_counts(toml: Path) -> tuple[np.ndarray, np.ndarray]:
    """Electrons per position and per pixel, as LiberTEM reads the raw_csr export."""
    with Context.make_with("inline") as ctx:
        dataset = ctx.load("raw_csr", path=str(toml))
        per_position = ctx.run_udf(dataset=dataset, udf=SumSigUDF())["intensity"].data
        per_pixel = ctx.run_udf(dataset=dataset, udf=SumUDF())["intensity"].data
    return per_position, per_pixel


def test_a_raw_csr_export_keeps_missing_positions_empty(tmp_path: Path) -> None:
    events = [np.array([0, 7, 47], dtype=np.uint32), None, np.array([5], dtype=np.uint32), np.zeros(0, np.uint32)]
    counted = write_counted_scan(tmp_path / "a.h5", events, scan_shape=(2, 2), frame_shape=FRAME)
    export_raw_csr(counted, tmp_path / "a.toml")
    per_position, per_pixel = libertem_counts(tmp_path / "a.toml")
    assert per_position.tolist() == [[3, 0], [1, 0]]
    assert np.flatnonzero(per_pixel).tolist() == [0, 5, 7, 47]


def test_a_scan_without_electrons_exports_to_files_libertem_can_map(tmp_path: Path) -> None:
    counted = write_counted_scan(tmp_path / "z.h5", [np.zeros(0, np.uint32)] * 4, scan_shape=(2, 2),
                                 frame_shape=FRAME)
    export_raw_csr(counted, tmp_path / "z.toml")
    per_position, _ = libertem_counts(tmp_path / "z.toml")
    assert per_position.tolist() == [[0, 0], [0, 0]]
    export_hspy(counted, tmp_path / "z.hspy")
    [signal] = file_reader(str(tmp_path / "z.hspy"))
    assert signal["data"].shape == (2, 2, *FRAME) and not signal["data"].any()


@pytest.mark.parametrize(("text", "region"), [
    (None, Region(0, 4, 0, 5)), ("1:3,2:5", Region(1, 3, 2, 5)), (":2,3:", Region(0, 2, 3, 5)),
])
def test_a_region_is_rows_then_columns_with_exclusive_ends(text: str | None, region: Region) -> None:
    assert parse_region(text, (4, 5)) == region


def test_a_region_outside_the_scan_is_refused_with_the_scans_size() -> None:
    with pytest.raises(UsageError, match=r"region '2:2,0:1' is empty or outside the scan of 4 x 5 positions"):
        parse_region("2:2,0:1", (4, 5))
