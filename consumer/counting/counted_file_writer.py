"""A counted file written part by part as the parts of its scan come, in stempy's layout.

:func:`sectorflow.consumer.counting.write_counted_scan` takes the whole scan's events at once; rank 0 would
have to hold every NodeGroup's part of a scan (8 GB of events for a 1024 x 1024 scan at 2,000
electrons per frame) before writing. A :class:`CountedFileWriter` instead puts each part's frames
at their positions of ``/electron_events/frames`` as the part comes (a point selection of the vlen
dataset, in blocks of ``BLOCK_FRAMES``), so the writer holds no more than the part it is given;
:meth:`CountedFileWriter.finish` writes the rest of the layout (counted_file.py) once the scan is
whole and :meth:`CountedFileWriter.publish` links the file to its final name. As with
write_counted_scan, the file is built under a hidden temporary name beside its final one, and a
file is never replaced.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sectorflow.analysis import Results

from .arrays import CountingError, ThresholdStatistics
from .counted_file import (
    FILE_VERSION,
    _check_incomplete,
    _counting_attrs,
    _create_frames,
    _create_partial,
    _h5py,
    _incomplete_lists,
    _outcome,
    _shape,
    _vlen_uint32,
    _write_nexus,
    _write_outputs,
    _write_rest,
    event_dataset_options,
)

log = logging.getLogger(__name__)

#: Frames written (or read back) at once: bounds the per-frame objects a block needs (about 100
#: bytes each) whatever the part's size.
BLOCK_FRAMES = 1 << 16


class CountedFileWriter:
    """One counted scan's file, its frames written as they come.

    :param path: the file's final name (its directory gets the temporary file; the name may still
        change at :meth:`publish`, e.g. to a part name another writer left free).
    :param scan_shape: (rows, cols) of probe positions.
    :param frame_shape: (rows, cols) of a frame.
    :param compression: the event datasets' filter (counted_file.COMPRESSIONS).
    :param mode: the file's permission bits; None: 0666 less the umask.
    :param group: the file's group id; None: the writer's.
    :raises CountingError: bad shapes or an unknown compression.
    :raises OSError: the temporary file could not be created (nothing is left).
    """

    def __init__(self, path: str | os.PathLike[str], *, scan_shape: Sequence[int], frame_shape: Sequence[int],
                 compression: str = "none", mode: int | None = None, group: int | None = None) -> None:
        self.scan_shape = _shape(scan_shape, "scan_shape")
        self.frame_shape = _shape(frame_shape, "frame_shape")
        self.positions = self.scan_shape[0] * self.scan_shape[1]
        self.pixels = self.frame_shape[0] * self.frame_shape[1]
        event_dataset_options(compression, self.positions)
        self.compression = compression
        self.directory = Path(path).parent
        self.partial = _create_partial(Path(path))
        self._file: Any = None
        try:
            if mode is not None:
                os.chmod(self.partial, mode)
            if group is not None:
                os.chown(self.partial, -1, group)
            self._file = _h5py().File(self.partial, "w")
            self._file.attrs["version"] = FILE_VERSION
            self._frames = _create_frames(self._file, self.positions, self.frame_shape, compression)
        except BaseException:
            self.discard()
            raise
        self.present = np.zeros(self.positions, dtype=bool)
        self.events_written = 0

    def add(self, positions: Iterable[int], offsets: Sequence[int], events: np.ndarray) -> None:
        """Write a part's frames at their positions (CSR: frame i is ``events[offsets[i]:offsets[i+1]]``).

        :raises CountingError: a position out of range or written before, or events that are not
            ascending pixel indices of the frame (nothing of the part is written).
        :raises OSError: the write failed (a full disk).
        """
        positions = np.asarray(positions, dtype=np.int64)
        offsets = np.asarray(offsets, dtype=np.int64)
        events = np.asarray(events)
        if len(offsets) != len(positions) + 1 or (len(positions) and offsets[-1] > len(events)):
            raise CountingError(f"a part of {len(positions)} positions needs {len(positions) + 1} offsets within its "
                                f"{len(events)} events, got {len(offsets)}")
        if not len(positions):
            return
        out = (positions < 0) | (positions >= self.positions)
        if out.any():
            raise CountingError(f"position {int(positions[out][0])} is outside the scan of {self.positions} positions")
        seen = np.sort(positions)
        twice = np.concatenate([positions[self.present[positions]], seen[1:][seen[1:] == seen[:-1]]])
        if twice.size:
            raise CountingError(f"position {int(twice[0])} comes twice: a position's frame is written once")
        if events.dtype != np.uint32:
            if events.size and (not np.issubdtype(events.dtype, np.integer) or events.min() < 0):
                raise CountingError(f"events must be flat pixel indices (uint32), got {events.dtype}")
            events = events.astype(np.uint32)
        _check_frames(positions, offsets, events, self.pixels)
        h5py = _h5py()
        order = np.argsort(positions, kind="stable")
        vlen = _vlen_uint32()
        for start in range(0, len(order), BLOCK_FRAMES):
            block = order[start:start + BLOCK_FRAMES]
            frames = np.empty(len(block), dtype=vlen)
            for i, j in enumerate(block):
                frames[i] = events[offsets[j]:offsets[j + 1]]
            space = self._frames.id.get_space()
            space.select_elements(positions[block].reshape(-1, 1))
            self._frames.id.write(h5py.h5s.create_simple((len(block),)), space, frames)
        self.present[positions] = True
        self.events_written += int(offsets[-1] - offsets[0])

    def drop(self, positions: Iterable[int]) -> None:
        """Empty the frames written at ``positions``: the scan holds no frame there (missing).

        :raises OSError: the write failed.
        """
        positions = np.unique(np.asarray(positions, dtype=np.int64))
        if not len(positions):
            return
        h5py = _h5py()
        vlen = _vlen_uint32()
        empty = np.zeros(0, dtype=np.uint32)
        for start in range(0, len(positions), BLOCK_FRAMES):
            block = positions[start:start + BLOCK_FRAMES]
            frames = np.empty(len(block), dtype=vlen)
            for i in range(len(block)):
                frames[i] = empty
            space = self._frames.id.get_space()
            space.select_elements(block.reshape(-1, 1))
            self._frames.id.write(h5py.h5s.create_simple((len(block),)), space, frames)
        self.present[positions] = False

    def frames(self) -> Sequence[np.ndarray]:
        """The frames written so far, scan-major, read from the file a block at a time (a position
        not written has no events); also once finished, until published or discarded.

        :raises OSError: the file cannot be read.
        """
        if self._file is None:
            self._file = _h5py().File(self.partial, "r")
            self._frames = self._file["electron_events/frames"]
        return _FileFrames(self._frames)

    def finish(self, *, statistics: ThresholdStatistics | Mapping[str, Any] | None = None,
               incomplete: Mapping[int, Iterable[int]] | Iterable[int] | None = None,
               counting: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None,
               outcome: str | None = None, reason: str = "", analyses: Results | None = None) -> None:
        """Write the rest of the layout; positions never written are the missing ones. The arguments
        are write_counted_scan's.

        :raises CountingError: incomplete positions out of range or missing, a wrong outcome.
        :raises OSError: the write failed.
        """
        missing = np.flatnonzero(~self.present).tolist()
        incomplete_positions, incomplete_sectors = _incomplete_lists(incomplete)
        _check_incomplete(incomplete_positions, self.positions, set(missing))
        outcome = _outcome(outcome, not missing and not incomplete_positions)
        _write_rest(self._file, self.scan_shape, _counting_attrs(statistics, counting), missing, incomplete_positions,
                    incomplete_sectors, outcome, reason, metadata)
        self._file.close()
        self._file = None
        if analyses is not None:
            _write_outputs(self.partial, analyses, self.scan_shape)
        # the NeXus events (NXevent_data, what the field reads), from the file's frames
        _write_nexus(self.partial, None, self.scan_shape, self.frame_shape, metadata, self.compression)
        self._missing, self._incomplete = len(missing), len(incomplete_positions)

    def publish(self, path: str | os.PathLike[str]) -> Path:
        """Link the finished file to ``path`` and drop the temporary name.

        :raises FileExistsError: ``path`` exists (the file stays, for another name).
        :raises OSError: the link failed.
        """
        target = Path(path)
        if self._file is not None:  # read back meanwhile
            self._file.close()
            self._file = None
        os.link(self.partial, target)  # fails if the name exists: a file is never replaced
        self.partial.unlink(missing_ok=True)
        log.info("wrote %s: %d positions, %d events, %d missing positions, %d incomplete frames",
                 target, self.positions, self.events_written, self._missing, self._incomplete)
        return target

    def discard(self) -> None:
        """Close and remove the temporary file (what it held is gone)."""
        if self._file is not None:
            try:
                self._file.close()
            except Exception:  # noqa: BLE001 (a failed disk: the file goes anyway)
                pass
            self._file = None
        self.partial.unlink(missing_ok=True)


class _FileFrames(Sequence[np.ndarray]):
    """/electron_events/frames as a read-only sequence, read a block at a time."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return int(self.dataset.shape[0])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(self.dataset[index])
        return self.dataset[int(index)]

    def __iter__(self) -> Iterator[np.ndarray]:
        for start in range(0, len(self), BLOCK_FRAMES):
            yield from self.dataset[start:start + BLOCK_FRAMES]


def _check_frames(positions: np.ndarray, offsets: np.ndarray, events: np.ndarray, pixels: int) -> None:
    """Each frame's events ascending and below ``pixels``, checked for the whole part at once."""
    flat = events[offsets[0]:offsets[-1]]
    if not flat.size:
        return
    rising = flat[1:] > flat[:-1]
    starts = offsets[1:-1] - offsets[0]
    inner = starts[(starts > 0) & (starts < len(flat))] - 1  # from one frame's last event to the next's first
    rising[inner] = True
    bad = np.flatnonzero(~rising) + 1 if not rising.all() else np.flatnonzero(flat >= pixels)
    if bad.size:
        frame = int(np.searchsorted(offsets - offsets[0], bad[0], side="right") - 1)
        values = events[offsets[frame]:offsets[frame + 1]]
        raise CountingError(
            f"events of position {int(positions[frame])} must be ascending flat pixel indices below {pixels}, "
            f"got {values.tolist()[:8]}{' ...' if len(values) > 8 else ''}"
        )


__all__ = ["BLOCK_FRAMES", "CountedFileWriter"]
