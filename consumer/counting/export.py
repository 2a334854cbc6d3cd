"""A counted file in the formats other tools open: LiberTEM's ``raw_csr`` and HyperSpy's ``.hspy``.

``raw_csr`` (LiberTEM's RawCSRDataSet: ``ctx.load("raw_csr", path="OUT.toml")``): a TOML descriptor
and three flat little-endian files beside it, the CSR our events are: ``<stem>.indptr.raw`` int64
(positions + 1: where each position's events begin and end), ``<stem>.indices.raw`` uint32 (the
events' flat pixel indices row * frame_cols + col), ``<stem>.data.raw`` uint8 (1 per event: an
electron). The whole scan, without a dense copy: the size of the events.

``hspy`` (HyperSpy's own HDF5 format, version 3.3, read by ``hyperspy.api.load`` and RosettaSciIO's
``rsciio.hspy.file_reader``; py4DSTEM takes its array: ``py4DSTEM.DataCube(data=h5py.File(OUT)
["Experiments/<title>/data"][()])``): the dense 4D uint8 array (scan rows, scan cols, frame rows,
frame cols) of electrons per pixel, for a region of the scan (dense is 331 KB a frame at 576 x 576:
a 128 x 128 scan is 5.4 GB), deflate-compressed in chunks of one frame. Axes 0 and 1 navigate (scan
rows, cols; scaled by the scan step when the file knows it), 2 and 3 are the detector's rows, cols.

Both read the file in blocks of positions: memory stays at a block's events, whatever the scan's size.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sectorflow.errors import SectorflowError, UsageError

#: Positions read from the counted file at once.
BLOCK_POSITIONS = 4096
HSPY_VERSION = "3.3"
FORMATS = ("raw_csr", "hspy")

Progress = Callable[[int, int], None]
"""Called with (positions done, positions in all) as the export goes."""


@dataclass(frozen=True)
class Region:
    """Scan rows [row0, row1) and columns [col0, col1)."""

    row0: int
    row1: int
    col0: int
    col1: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.row1 - self.row0, self.col1 - self.col0


def parse_region(text: str | None, scan_shape: tuple[int, int]) -> Region:
    """``ROW0:ROW1,COL0:COL1`` (ends exclusive, either side of a colon may be left out) within the scan.

    :raises UsageError: not of that form, or empty, or outside the scan.
    """
    rows, cols = scan_shape
    if text is None:
        return Region(0, rows, 0, cols)
    try:
        row_part, col_part = text.split(",")
        (r0, r1), (c0, c1) = (_span(part) for part in (row_part, col_part))
    except ValueError:
        raise UsageError(f"region {text!r}: expected ROW0:ROW1,COL0:COL1 (e.g. 0:32,0:32)") from None
    region = Region(r0 or 0, rows if r1 is None else r1, c0 or 0, cols if c1 is None else c1)
    if not (0 <= region.row0 < region.row1 <= rows and 0 <= region.col0 < region.col1 <= cols):
        raise UsageError(f"region {text!r} is empty or outside the scan of {rows} x {cols} positions")
    return region


def _span(part: str) -> tuple[int | None, int | None]:
    start, end = part.split(":")
    return (int(start) if start.strip() else None, int(end) if end.strip() else None)


class _CountedEvents:
    """The events of a counted file's /electron_events/frames, read in blocks of positions."""

    def __init__(self, f: Any, path: Path) -> None:
        try:
            self.frames = f["electron_events/frames"]
            scan = f["electron_events/scan_positions"]
            self.frame_shape = (int(self.frames.attrs["Nx"]), int(self.frames.attrs["Ny"]))
            self.scan_shape = (int(scan.attrs["Ny"]), int(scan.attrs["Nx"]))
        except KeyError as error:
            raise SectorflowError(f"{path}: not a counted scan in stempy's layout ({error})") from None
        if self.frames.shape[0] != self.scan_shape[0] * self.scan_shape[1]:
            raise SectorflowError(f"{path}: {self.frames.shape[0]} frames for a scan of {self.scan_shape[0]} x "
                                  f"{self.scan_shape[1]} positions; only one frame per position can be exported")
        step = f.get("metadata/instrument/scan_step")
        self.scan_step = (float(step.attrs["value"]), str(step.attrs.get("units", ""))) if step is not None else None

    def blocks(self, start: int, stop: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first position, its events and the next ones') for positions [start, stop)."""
        for first in range(start, stop, BLOCK_POSITIONS):
            yield first, self.frames[first:min(first + BLOCK_POSITIONS, stop)]


def _open(path: Path) -> Any:
    import h5py

    if not path.is_file():
        raise UsageError(f"{path}: no such file; give a counted scan's HDF5 file (FOURD_<scan>_counted.h5)")
    try:
        return h5py.File(path, "r")
    except OSError as error:
        raise SectorflowError(f"{path}: not an HDF5 file ({error})") from None


def _new(path: Path) -> Path:
    if path.exists():
        raise FileExistsError(f"{path} exists; export never replaces a file: choose another name or remove it")
    return path


def raw_csr_paths(toml_path: Path) -> dict[str, Path]:
    """The descriptor and the three files ``export_raw_csr`` writes for ``toml_path``."""
    stem = toml_path.with_suffix("")
    return {"toml": toml_path, **{part: stem.with_name(f"{stem.name}.{part}.raw") for part in ("indptr", "indices", "data")}}


def export_raw_csr(counted: Path, toml_path: Path, *, progress: Progress | None = None) -> dict[str, Path]:
    """Write the counted file's events as LiberTEM's raw_csr: ``toml_path`` and three files beside it.

    :returns: the paths written, by part (toml, indptr, indices, data).
    :raises UsageError: ``counted`` is not a file, or ``toml_path`` does not end in .toml.
    :raises SectorflowError: ``counted`` is not a counted scan.
    :raises FileExistsError: one of the outputs exists (nothing is written).
    """
    if toml_path.suffix != ".toml":
        raise UsageError(f"{toml_path}: a raw_csr export is named by its descriptor, which ends in .toml")
    paths = raw_csr_paths(toml_path)
    for path in paths.values():
        _new(path)
    with _open(counted) as f:
        events = _CountedEvents(f, counted)
        positions = events.frames.shape[0]
        written: list[Path] = []
        try:
            with open(_exclusive(paths["indptr"], written), "wb") as indptr, \
                    open(_exclusive(paths["indices"], written), "wb") as indices, \
                    open(_exclusive(paths["data"], written), "wb") as data:
                total = 0
                np.zeros(1, dtype="<i8").tofile(indptr)
                for first, block in events.blocks(0, positions):
                    lengths = np.fromiter((len(e) for e in block), dtype=np.int64, count=len(block))
                    (total + np.cumsum(lengths)).astype("<i8").tofile(indptr)
                    if lengths.sum():
                        np.concatenate(list(block)).astype("<u4").tofile(indices)
                        np.ones(int(lengths.sum()), dtype="u1").tofile(data)
                    total += int(lengths.sum())
                    if progress:
                        progress(first + len(block), positions)
                if total == 0:  # LiberTEM memory-maps the files, and an empty file cannot be: one unused element
                    np.zeros(1, dtype="<u4").tofile(indices)
                    np.zeros(1, dtype="u1").tofile(data)
            rows, cols = events.scan_shape
            frame_rows, frame_cols = events.frame_shape
            descriptor = (
                "# sectorflow export of " + counted.name.replace('"', "") + ": LiberTEM's raw_csr "
                "(ctx.load(\"raw_csr\", path=...)), one row per probe position, scan-major\n"
                "[params]\nfiletype = \"raw_csr\"\n"
                f"nav_shape = [{rows}, {cols}]\nsig_shape = [{frame_rows}, {frame_cols}]\n\n"
                "[raw_csr]\n"
                f"indptr_file = \"{paths['indptr'].name}\"\nindptr_dtype = \"<i8\"\n"
                f"indices_file = \"{paths['indices'].name}\"\nindices_dtype = \"<u4\"\n"
                f"data_file = \"{paths['data'].name}\"\ndata_dtype = \"<u1\"\n"
            )
            with open(_exclusive(paths["toml"], written), "w", encoding="utf-8") as descriptor_file:
                descriptor_file.write(descriptor)
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            raise
    return paths


def _exclusive(path: Path, written: list[Path]) -> Path:
    """Create ``path`` (it must not exist) and note it, so a failed export removes what it began."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    written.append(path)
    return path


def export_hspy(counted: Path, out: Path, *, region: str | None = None, max_bytes: int = 8 << 30,
                progress: Progress | None = None) -> tuple[Path, Region]:
    """Write a region of the counted scan as a dense 4D array in HyperSpy's .hspy format.

    :param region: ``ROW0:ROW1,COL0:COL1`` of scan positions; None: the whole scan.
    :param max_bytes: refuse a dense array larger than this (before compression).
    :returns: the file written and the region it holds.
    :raises UsageError: no such file, a bad region, a name not ending in .hspy, or a region too large.
    :raises SectorflowError: ``counted`` is not a counted scan.
    :raises FileExistsError: ``out`` exists.
    """
    import h5py

    if out.suffix != ".hspy":
        raise UsageError(f"{out}: HyperSpy reads a .hspy file by its suffix; name the output *.hspy")
    _new(out)
    with _open(counted) as f:
        events = _CountedEvents(f, counted)
        chosen = parse_region(region, events.scan_shape)
        frame_rows, frame_cols = events.frame_shape
        rows, cols = chosen.shape
        size = rows * cols * frame_rows * frame_cols
        if size > max_bytes:
            raise UsageError(f"a dense {rows} x {cols} x {frame_rows} x {frame_cols} array is {size / 1e9:.1f} GB, over "
                             f"--max-gb {max_bytes / 1e9:g}: choose a smaller --region, or raw_csr for the whole scan")
        written: list[Path] = []
        try:
            with h5py.File(_exclusive(out, written), "w") as hspy:
                data = _hspy_layout(hspy, counted, events, chosen)
                frame = np.zeros(frame_rows * frame_cols, dtype=np.uint8)
                scan_cols = events.scan_shape[1]
                for row in range(chosen.row0, chosen.row1):
                    start = row * scan_cols
                    for first, block in events.blocks(start + chosen.col0, start + chosen.col1):
                        for k, position_events in enumerate(block):
                            frame[:] = 0
                            frame[position_events] = 1
                            col = first + k - start
                            data[row - chosen.row0, col - chosen.col0] = frame.reshape(frame_rows, frame_cols)
                    if progress:
                        progress((row - chosen.row0 + 1) * cols, rows * cols)
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            raise
    return out, chosen


def _hspy_layout(hspy: Any, counted: Path, events: _CountedEvents, region: Region) -> Any:
    """HyperSpy's root attributes, one experiment with its axes and metadata; returns its data dataset."""
    from sectorflow import __version__

    frame_rows, frame_cols = events.frame_shape
    rows, cols = region.shape
    hspy.attrs["file_format"] = "HyperSpy"
    hspy.attrs["file_format_version"] = HSPY_VERSION
    title = counted.stem
    experiment = hspy.create_group(f"Experiments/{title}")
    experiment.attrs["package"] = ""
    experiment.attrs["package_version"] = ""
    data = experiment.create_dataset("data", (rows, cols, frame_rows, frame_cols), dtype=np.uint8,
                                     chunks=(1, 1, frame_rows, frame_cols), compression="gzip", compression_opts=1)
    scale, units = events.scan_step if events.scan_step else (1.0, "")
    axes = [("y", scale, region.row0 * scale, units, True, rows), ("x", scale, region.col0 * scale, units, True, cols),
            ("ky", 1.0, 0.0, "px", False, frame_rows), ("kx", 1.0, 0.0, "px", False, frame_cols)]
    for i, (name, step, offset, unit, navigate, size) in enumerate(axes):
        axis = experiment.create_group(f"axis-{i}")
        axis.attrs.update({"name": name, "scale": step, "offset": offset, "units": unit, "navigate": navigate,
                           "size": size, "_type": "UniformDataAxis"})
    metadata = experiment.create_group("metadata")
    general = metadata.create_group("General")
    general.attrs["title"] = title
    general.attrs["original_filename"] = counted.name
    signal = metadata.create_group("Signal")
    signal.attrs["signal_type"] = "electron_diffraction"
    signal.attrs["quantity"] = "Electrons (counts)"
    original = experiment.create_group("original_metadata")
    original.attrs["exported_by"] = f"sectorflow {__version__}"
    original.attrs["region"] = f"{region.row0}:{region.row1},{region.col0}:{region.col1}"
    return data


__all__ = ["FORMATS", "Region", "export_hspy", "export_raw_csr", "parse_region", "raw_csr_paths"]
