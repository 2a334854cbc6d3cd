"""The counted-scan HDF5 file: stempy's layout (version 3), so ``stempy.io.load_electron_counts``
opens it, plus an honest record of what did not arrive.

Layout (docs/contracts.md, "Counted output"; attribute meanings checked against stempy 3.6.0's own save)::

    /                                   attrs: version = 3
    /electron_events/frames             vlen uint32, one element per probe position, scan-major
                                        (position = row * scan_cols + col); each element the
                                        ascending flat pixel indices row * frame_cols + col.
                                        attrs: Nx = frame rows, Ny = frame cols
    /electron_events/scan_positions     int64 0 .. positions - 1
                                        attrs: Nx = scan cols, Ny = scan rows
    /metadata/electron_counting         attrs: the threshold statistics (STATISTICS_FIELDS) and
                                        how the frames were corrected
    /metadata/completeness              attrs: positions, missing_positions,
                                        incomplete_frames, complete, outcome
                                        ("complete" or "incomplete": the scan's
                                        outcome as its writer knows it, which may
                                        know of more missing, e.g. NodeGroups that
                                        never reported), reason ("" when complete)
                                        datasets: missing_positions (int64), positions with no
                                        frame at all (their event list is empty);
                                        incomplete_positions (int64), frames counted with sectors
                                        missing; incomplete_missing_sectors (vlen uint32), the
                                        sectors each of those lacked
    /metadata/<name>                    any further metadata given (nested dicts become groups)
    /virtual_images/<name>              float32 (scan rows, scan cols), one per virtual detector of
                                        [[analysis.virtual_detectors]] (the shipped ones: bright_field,
                                        a disk, and dark_field, an annulus): electrons in the detector
                                        per position, NaN where no frame was counted; attrs: kind
                                        ("disk", "annulus", "rectangle", "mask") and its geometry in
                                        pixels (centre_row, centre_col, radius; centre_row, centre_col,
                                        inner, outer; row0, col0, rows, cols; mask_file, pixels)
    /virtual_images/com_x, com_y        float32: centre of mass of the frame's electrons minus the
                                        pattern centre, detector columns (x) and rows (y); NaN
                                        where no frame or no electron
    /virtual_images/diffraction         uint64 (frame rows, frame cols): electrons per pixel summed
                                        over the scan's counted frames
                                        attrs of /virtual_images: centre_row, centre_col (the centre
                                        of mass's origin), detectors (the detectors' names, in the
                                        configured order); pixel (r, c) is [r, r+1) x [c, c+1)
                                        (/virtual_images is there when the writer made the images:
                                        the NodeGroups do, [analysis] virtual_images)
    /analysis/<name>                    any further analysis of the registry ([analysis] analyses),
                                        at the path its declaration gives (analysis/SPEC.md), e.g.
                                        /analysis/radial_profile float32 (scan rows, scan cols, rings)

    /entry                              NeXus NXentry: the events again as NXevent_data (event_id,
                                        event_index, ...), the instrument, attrs NX_class, default
                                        (consumer/counting/nexus_events.py; docs/contracts.md, "NeXus events
                                        beside stempy's layout", says why a copy and what it costs)

Every dataset under /virtual_images and /analysis is an output of a registered analysis
(sectorflow.analysis): the writer and the reader iterate over the registry, not over names.

stempy's loader turns the attributes under /metadata into ``SparseArray.metadata``; it skips
datasets, so the position lists are read with :func:`read_counted_scan`.

A counted file is never destroyed: it is written under a temporary name in its directory and
hard-linked to its final name, which fails if that name exists (``FileExistsError``), so no
writer ever replaces a file, and a failed write (a full disk) leaves nothing under the final name.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sectorflow.errors import SectorflowError
from sectorflow.protocol import OUTCOME_ABORTED, OUTCOME_COMPLETE, OUTCOME_INCOMPLETE

from sectorflow.analysis import PER_POSITION, Context, Output, Results, outputs_of, registered

from .arrays import STATISTICS_FIELDS, CountingError, ThresholdStatistics, statistics_dict
from .nexus_events import write_nexus_events

if TYPE_CHECKING:
    import h5py

log = logging.getLogger(__name__)

#: The stempy SparseArray file version this module writes.
FILE_VERSION = 3


def _h5py() -> Any:
    """h5py, imported when a file is first read or written: a NodeGroup rank that never writes one
    does not carry its 13 MiB, and rank 0 only once its frames are counted (BENCHMARKS.md, memory)."""
    import h5py

    return h5py


def _vlen_uint32() -> np.dtype:
    return _h5py().vlen_dtype(np.uint32)


#: ``[nodegroup] compression``: the filters of the event datasets, HDF5's own, so that any h5py (and
#: stempy) reads them without a plugin. "deflate" is gzip level 4 after the byte shuffle.
COMPRESSIONS: dict[str, dict[str, Any]] = {
    "none": {},
    "deflate": {"compression": "gzip", "compression_opts": 4, "shuffle": True},
}
#: Elements per chunk of a compressed event dataset: 64 Ki frames of /electron_events/frames (1 MiB of
#: heap references) or 1 Mi events (4 MiB) of a flat one.
FRAMES_CHUNK = 1 << 16
EVENTS_CHUNK = 1 << 20


def event_dataset_options(compression: str, length: int, chunk: int = EVENTS_CHUNK) -> dict[str, Any]:
    """``create_dataset`` keywords of an event dataset of ``length`` elements under ``compression``.

    A vlen dataset (/electron_events/frames) keeps its events in HDF5's global heap, which no filter
    reaches: only its 16-byte heap references are compressed (BENCHMARKS.md, counted_write); a flat
    event dataset compresses whole.

    :raises CountingError: an unknown compression (the known ones named).
    """
    if compression not in COMPRESSIONS:
        raise CountingError(f"compression {compression!r} is not one of {', '.join(map(repr, COMPRESSIONS))}")
    if compression == "none":
        return {}
    return {"chunks": (max(1, min(length, chunk)),), **COMPRESSIONS[compression]}



@dataclass(frozen=True)
class CountedScan:
    """A counted scan as read back from its file.

    ``events[p]`` holds the events of probe position ``p`` (scan-major); a missing position has
    no events. ``metadata`` is every attribute under /metadata, nested by group, as stempy loads it.
    """

    events: list[np.ndarray]
    scan_shape: tuple[int, int]
    frame_shape: tuple[int, int]
    statistics: dict[str, Any]
    missing_positions: np.ndarray
    incomplete_positions: np.ndarray
    incomplete_missing_sectors: list[np.ndarray]
    metadata: dict[str, Any] = field(default_factory=dict)
    images: dict[str, np.ndarray] = field(default_factory=dict)
    """every registered analysis's output the file holds, by name, in the registry's order: each virtual
    detector's (in the configured order), com_x, com_y ((scan rows, scan cols) float32), "diffraction",
    then any further analysis's; empty if the file has none"""
    detectors: dict[str, dict[str, Any]] = field(default_factory=dict)
    """each virtual detector's attributes (kind and geometry) by name"""
    outputs: dict[str, Output] = field(default_factory=dict)
    """what each of ``images`` is (unit, label, per position or per scan), by name"""


def _shape(value: Sequence[int], name: str) -> tuple[int, int]:
    try:
        rows, cols = (int(v) for v in value)
    except (TypeError, ValueError):
        raise CountingError(f"{name} must be (rows, cols), got {value!r}") from None
    if rows <= 0 or cols <= 0:
        raise CountingError(f"{name} must be positive, got {rows} x {cols}")
    return rows, cols


def _position_array(events: Any, position: int) -> np.ndarray:
    if isinstance(events, np.ndarray) and events.dtype == np.uint32 and events.ndim == 1:
        return np.ascontiguousarray(events)  # the usual case, from the counter: no conversion
    array = np.asarray(events)
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise CountingError(
            f"events of position {position} must be a 1-D integer array, got {array.dtype} of shape {array.shape}"
        )
    if array.size and array.min() < 0:
        raise CountingError(
            f"events of position {position} must be ascending flat pixel indices, got {array.min()}"
        )
    return np.ascontiguousarray(array.astype(np.uint32))


def _validated_events(events: Sequence[Any], pixels: int) -> tuple[np.ndarray, list[int]]:
    """The events as an object array ready for a vlen write, and the missing positions."""
    frames = np.empty(len(events), dtype=_vlen_uint32())
    missing = []
    empty = np.zeros(0, dtype=np.uint32)
    # Filled one element at a time and written with the low-level call in write_counted_scan:
    # through numpy or Dataset.__setitem__, event lists of equal length become a 2-D array (the
    # trap stempy's own save falls into).
    for position, position_events in enumerate(events):
        if position_events is None:
            missing.append(position)
            frames[position] = empty
        else:
            frames[position] = _position_array(position_events, position)
    # Range and order checked for all positions at once: per position it would dominate the
    # write of a million-position scan.
    lengths = np.fromiter((len(e) for e in frames), dtype=np.int64, count=len(frames))
    if lengths.sum() == 0:
        return frames, missing
    flat = np.concatenate(list(frames)).astype(np.int64)
    starts = np.cumsum(lengths) - lengths
    rising = np.diff(flat) > 0
    inner = starts[(starts > 0) & (starts < len(flat))] - 1  # steps from one position to the next
    rising[inner] = True
    bad = np.flatnonzero(~rising) + 1 if not rising.all() else np.flatnonzero(flat >= pixels)
    if bad.size:
        position = int(np.searchsorted(starts, bad[0], side="right") - 1)
        values = frames[position]
        raise CountingError(
            f"events of position {position} must be ascending flat pixel indices below {pixels}, "
            f"got {values.tolist()[:8]}{' ...' if len(values) > 8 else ''}"
        )
    return frames, missing


def _incomplete_lists(
    incomplete: Mapping[int, Iterable[int]] | Iterable[int] | None,
) -> tuple[list[int], list[np.ndarray]]:
    if incomplete is None:
        return [], []
    if isinstance(incomplete, Mapping):
        positions = sorted(int(p) for p in incomplete)
        sectors = [np.asarray(sorted(int(s) for s in incomplete[p]), dtype=np.uint32) for p in positions]
        return positions, sectors
    positions = sorted(int(p) for p in incomplete)
    return positions, [np.zeros(0, dtype=np.uint32) for _ in positions]


def _save_attrs(group: h5py.Group, values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, Mapping):
            _save_attrs(group.require_group(key), value)
        else:
            group.attrs[key] = value


def write_counted_scan(
    path: str | os.PathLike[str],
    events: Sequence[Any],
    *,
    scan_shape: Sequence[int],
    frame_shape: Sequence[int],
    statistics: ThresholdStatistics | Mapping[str, Any] | None = None,
    incomplete: Mapping[int, Iterable[int]] | Iterable[int] | None = None,
    counting: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    outcome: str | None = None,
    reason: str = "",
    analyses: Results | None = None,
    mode: int | None = None,
    group: int | None = None,
    compression: str = "none",
) -> Path:
    """Write one counted scan in stempy's layout, creating the file exclusively.

    The file is written under a temporary name in the same directory and hard-linked to ``path``
    when complete, so a reader never sees half a file and an existing file is never replaced.
    Its permissions follow the umask, as any file's (0644 under the usual 022), unless ``mode``
    says otherwise: the scientist's account is rarely the writer's.

    :param path: the .h5 file to create; it must not exist.
    :param events: one entry per probe position, scan-major: ascending flat pixel indices, or
        None for a position whose frame never arrived (recorded as missing).
    :param scan_shape: (rows, cols) of probe positions, i.e. (scan_y, scan_x).
    :param frame_shape: (rows, cols) of a frame.
    :param statistics: the thresholds used (from ``calculate_thresholds``) or a dict of them.
    :param incomplete: positions whose frame was counted with sectors missing, as
        {position: missing sector indices} or just the positions.
    :param counting: further attributes of /metadata/electron_counting (e.g. how frames were
        corrected: dark_reference, gain, row_dark).
    :param metadata: further metadata, stored under /metadata (nested dicts become groups).
    :param outcome: "complete" or "incomplete" (default: complete when no position is missing and
        no frame incomplete); a writer that knows of more missing says incomplete; "aborted" for a
        scan an operator aborted (sectorflow abort), whatever it holds.
    :param reason: why the scan is incomplete ("" when complete).
    :param analyses: the outputs of the scan's analyses (sectorflow.analysis.Results), each written
        at its path; None for none.
    :param mode: the file's permission bits (e.g. 0o640), exactly; None: 0666 less the umask.
    :param group: the group id the file is given (the writer must belong to it); None: the writer's.
    :param compression: the event datasets' filter, a key of :data:`COMPRESSIONS`.
    :returns: the path written.
    :raises CountingError: events that do not fit the shapes, or positions out of range.
    :raises FileExistsError: ``path`` exists (it is left as it was).
    :raises OSError: the file could not be written (nothing is left under ``path``).
    """
    scan_rows, scan_cols = _shape(scan_shape, "scan_shape")
    frame_rows, frame_cols = _shape(frame_shape, "frame_shape")
    positions = scan_rows * scan_cols
    pixels = frame_rows * frame_cols
    if len(events) != positions:
        raise CountingError(
            f"events has {len(events)} entries, expected one per probe position "
            f"({scan_rows} x {scan_cols} = {positions})"
        )
    event_dataset_options(compression, positions)  # an unknown one refused before anything is written
    frames, missing = _validated_events(events, pixels)
    incomplete_positions, incomplete_sectors = _incomplete_lists(incomplete)
    _check_incomplete(incomplete_positions, positions, set(missing))
    counting_attrs = _counting_attrs(statistics, counting)
    outcome = _outcome(outcome, not missing and not incomplete_positions)

    target = Path(path)
    if target.exists():  # checked again, atomically, by the link below; this saves the write
        raise FileExistsError(f"{target} exists; a counted file is never replaced")
    partial = _create_partial(target)
    try:
        if mode is not None:
            os.chmod(partial, mode)
        if group is not None:
            os.chown(partial, -1, group)
        h5py = _h5py()
        with h5py.File(partial, "w") as f:
            f.attrs["version"] = FILE_VERSION
            dataset = _create_frames(f, positions, (frame_rows, frame_cols), compression)
            dataset.id.write(h5py.h5s.ALL, h5py.h5s.ALL, frames)
            _write_rest(f, (scan_rows, scan_cols), counting_attrs, missing, incomplete_positions, incomplete_sectors,
                        outcome, reason, metadata)
        if analyses is not None:
            _write_outputs(partial, analyses, (scan_rows, scan_cols))
        _write_nexus(partial, frames, (scan_rows, scan_cols), (frame_rows, frame_cols), metadata, compression)
        os.link(partial, target)  # fails if the name exists: a file is never replaced
    finally:
        partial.unlink(missing_ok=True)
    log.info(
        "wrote %s: %d positions, %d events, %d missing positions, %d incomplete frames",
        target, positions, sum(len(e) for e in frames), len(missing), len(incomplete_positions),
    )
    return target


def _create_partial(target: Path) -> Path:
    """A new empty file beside ``target`` under a name of its own, created with 0666 less the
    umask (``tempfile.mkstemp`` would make it 0600, which no other user reads)."""
    while True:
        partial = target.parent / f".{target.name}.{secrets.token_hex(4)}.partial"
        try:
            os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return partial
        except FileExistsError:
            continue


def _check_incomplete(incomplete_positions: list[int], positions: int, missing: set[int]) -> None:
    for position in incomplete_positions:
        if not 0 <= position < positions:
            raise CountingError(f"incomplete position {position} is outside the scan of {positions} positions")
        if position in missing:
            raise CountingError(f"position {position} is listed both as missing (None) and as incomplete")


def _counting_attrs(statistics: ThresholdStatistics | Mapping[str, Any] | None,
                    counting: Mapping[str, Any] | None) -> dict[str, Any]:
    if isinstance(statistics, ThresholdStatistics):
        statistics = statistics_dict(statistics)
    attrs = dict(statistics or {})
    attrs.update(counting or {})
    return attrs


def _outcome(outcome: str | None, complete: bool) -> str:
    if outcome is None:
        outcome = OUTCOME_COMPLETE if complete else OUTCOME_INCOMPLETE
    if outcome not in (OUTCOME_COMPLETE, OUTCOME_INCOMPLETE, OUTCOME_ABORTED) or (
            outcome == OUTCOME_COMPLETE and not complete):
        raise CountingError(f"outcome {outcome!r}: a file is complete (nothing missing), incomplete or aborted")
    return outcome


def _create_frames(f: h5py.File, positions: int, frame_shape: tuple[int, int], compression: str) -> h5py.Dataset:
    """/electron_events/frames, one empty event list per position until written."""
    group = f.create_group("electron_events")
    dataset = group.create_dataset("frames", (positions,), dtype=_vlen_uint32(),
                                   **event_dataset_options(compression, positions, FRAMES_CHUNK))
    dataset.attrs["Nx"] = np.int64(frame_shape[0])
    dataset.attrs["Ny"] = np.int64(frame_shape[1])
    return dataset


def _write_rest(f: h5py.File, scan_shape: tuple[int, int], counting_attrs: Mapping[str, Any], missing: list[int],
                incomplete_positions: list[int], incomplete_sectors: list[np.ndarray], outcome: str, reason: str,
                metadata: Mapping[str, Any] | None) -> None:
    """Everything of the layout but the frames: scan positions, counting and completeness, metadata."""
    h5py = _h5py()
    scan_rows, scan_cols = scan_shape
    positions = scan_rows * scan_cols
    scan = f.create_dataset("electron_events/scan_positions", data=np.arange(positions, dtype=np.int64))
    scan.attrs["Nx"] = np.int64(scan_cols)
    scan.attrs["Ny"] = np.int64(scan_rows)

    meta = f.create_group("metadata")
    _save_attrs(meta.create_group("electron_counting"), counting_attrs)
    completeness = meta.create_group("completeness")
    completeness.attrs["positions"] = np.int64(positions)
    completeness.attrs["missing_positions"] = np.int64(len(missing))
    completeness.attrs["incomplete_frames"] = np.int64(len(incomplete_positions))
    completeness.attrs["complete"] = not missing and not incomplete_positions
    completeness.attrs["outcome"] = outcome
    completeness.attrs["reason"] = reason
    completeness.create_dataset("missing_positions", data=np.asarray(missing, dtype=np.int64))
    completeness.create_dataset("incomplete_positions", data=np.asarray(incomplete_positions, dtype=np.int64))
    sectors = np.empty(len(incomplete_positions), dtype=_vlen_uint32())
    for i, missing_sectors in enumerate(incomplete_sectors):
        sectors[i] = missing_sectors
    dataset = completeness.create_dataset("incomplete_missing_sectors", (len(sectors),), dtype=_vlen_uint32())
    if len(sectors):
        dataset.id.write(h5py.h5s.ALL, h5py.h5s.ALL, sectors)
    _save_attrs(meta, metadata or {})


def _write_outputs(partial: Path, results: Results, scan_shape: tuple[int, int]) -> None:
    positions = scan_shape[0] * scan_shape[1]
    with _h5py().File(partial, "a") as f:
        for output, values in results.filled(positions):
            values = np.asarray(values)
            shape = (*scan_shape, *output.extra_shape) if output.per == PER_POSITION else output.extra_shape
            if values.size != int(np.prod(shape)):
                raise CountingError(f"{output.name} has {values.size} values, expected {' x '.join(map(str, shape))}")
            dataset = f.create_dataset(output.path, data=values.astype(output.dtype).reshape(shape))
            for key, value in output.attrs.items():
                dataset.attrs[key] = value
        for group, attrs in results.plan.group_attrs().items():
            _save_attrs(f.require_group(group), attrs)


def _write_nexus(partial: Path, frames: np.ndarray | None, scan_shape: tuple[int, int], frame_shape: tuple[int, int],
                 metadata: Mapping[str, Any] | None, compression: str = "none") -> None:
    """/entry, the events as NeXus NXevent_data beside stempy's layout (consumer/counting/nexus_events.py), the
    last part of a counted file written; ``frames`` None: from the file's /electron_events/frames,
    read a block at a time (a writer that never held the whole scan)."""
    from sectorflow import __version__

    with _h5py().File(partial, "a") as f:
        write_nexus_events(f, f["electron_events/frames"] if frames is None else frames, scan_shape=scan_shape,
                           frame_shape=frame_shape, instrument=(metadata or {}).get("instrument"), version=__version__,
                           filters=COMPRESSIONS[compression])


def _read_images(f: h5py.File, frame_shape: tuple[int, int]) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]],
                                                                      dict[str, Output]]:
    """Every registered analysis's output in the file, in the registry's order, each virtual
    detector's attributes, and the outputs; a file written before detectors were configurable lists
    no order (its detectors are the /virtual_images datasets no fixed path names)."""
    group = f.get("virtual_images")
    attrs = dict(group.attrs.items()) if group is not None else {}
    fixed = {o.path for o in outputs_of(registered(), Context(frame_shape, 0.0, 0.0))}
    names: list[str] = []
    if group is not None:
        listed = [str(name) for name in attrs.get("detectors", [])]
        names = [name for name in listed if name in group] or \
            [name for name in group if f"{group.name}/{name}" not in fixed]
    detectors = {name: dict(group[name].attrs.items()) for name in names} if group is not None else {}
    context = Context(frame_shape, float(attrs.get("centre_row", 0.0)), float(attrs.get("centre_col", 0.0)),
                      tuple(names), detectors)
    outputs = {o.name: o for o in outputs_of(registered(), context) if o.path in f}
    return {name: f[o.path][()] for name, o in outputs.items()}, detectors, outputs


def _load_attrs(group: h5py.Group) -> dict[str, Any]:
    values: dict[str, Any] = dict(group.attrs.items())
    for key, item in group.items():
        if isinstance(item, _h5py().Group):
            values[key] = _load_attrs(item)
    return values


def read_counted_scan(path: str | os.PathLike[str]) -> CountedScan:
    """Read a counted scan written by :func:`write_counted_scan` (one frame per position).

    :raises SectorflowError: the file lacks the layout or holds several frames per position.
    """
    h5py = _h5py()
    try:
        with h5py.File(path, "r") as f:
            frames = f["electron_events/frames"]
            scan_positions = f["electron_events/scan_positions"]
            frame_shape = (int(frames.attrs["Nx"]), int(frames.attrs["Ny"]))
            scan_shape = (int(scan_positions.attrs["Ny"]), int(scan_positions.attrs["Nx"]))
            if frames.shape[0] != scan_shape[0] * scan_shape[1]:
                raise SectorflowError(
                    f"{path}: {frames.shape[0]} frames for a scan of {scan_shape[0]} x {scan_shape[1]} positions; "
                    "only one frame per position is supported"
                )
            events = list(frames[()])
            images, detectors, outputs = _read_images(f, frame_shape)
            metadata = _load_attrs(f["metadata"]) if "metadata" in f else {}
            completeness = f.get("metadata/completeness")
            if completeness is not None:
                missing = completeness["missing_positions"][()]
                incomplete = completeness["incomplete_positions"][()]
                sectors = list(completeness["incomplete_missing_sectors"][()])
            else:
                missing = np.zeros(0, dtype=np.int64)
                incomplete = np.zeros(0, dtype=np.int64)
                sectors = []
    except (KeyError, OSError) as error:
        raise SectorflowError(f"{path}: not a counted scan in stempy's layout ({error})") from error
    return CountedScan(
        events=events,
        scan_shape=scan_shape,
        frame_shape=frame_shape,
        statistics={k: v for k, v in metadata.get("electron_counting", {}).items() if k in STATISTICS_FIELDS},
        missing_positions=missing,
        incomplete_positions=incomplete,
        incomplete_missing_sectors=sectors,
        metadata=metadata,
        images=images,
        detectors=detectors,
        outputs=outputs,
    )


__all__ = ["COMPRESSIONS", "FILE_VERSION", "CountedScan", "event_dataset_options", "read_counted_scan",
           "write_counted_scan"]
