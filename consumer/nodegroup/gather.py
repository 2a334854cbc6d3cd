"""Gathering the NodeGroups' parts of a scan on MPI rank 0 and writing the scan's file.

Each NodeGroup hands over its part of a scan as :class:`GroupResult` pieces of ``[nodegroup]
gather_piece_events`` events (picklable: they cross MPI): while the scan runs, a piece each time its
counting threads have counted that many events (:class:`RunningParts`; the part's number of pieces
not known yet), and when the scan ends its last piece, the frames not yet sent with the part's
account (counts, timing, per-scan outputs summed over every piece). Rank 0 writes each piece into the
scan's file as it comes and drops its events (consumer/counting/counted_file_writer.py), so neither rank 0 nor
any NodeGroup holds a scan's counted part: a part counts once its last piece came (its wait for the
other NodeGroups, ``gather_timeout_s``, starts then, not at a piece sent while the scan runs); a part
whose last piece never came (its rank died or stopped mid-scan) is left out of the file, its positions
missing, as a part that never came; a scan of which only such pieces came writes nothing and gives no
record, as a scan none of whose parts came. Rank 0 keeps a :class:`ScanGatherer`: a scan is ready when every NodeGroup of this job that is in the
scan's routing list has reported (routing lists come from the info messages, so a scan routed to
part of the job waits for that part only). A scan still waiting ``gather_timeout_s`` after its
first report is written with what came, the missing NodeGroups recorded.

Every write ends in a ``ScanFileRecord`` (outcome complete, incomplete or failed, the files, the
sectors counted per receiver, why) that the service publishes as ``scans/<n>/file``:

- The file is ``FOURD_<scan:010d>_counted.h5`` (output_dir.py), created exclusively by
  :func:`sectorflow.consumer.counting.write_counted_scan`: an existing file is never replaced.
- A part that comes for a scan already written (later than the gather timeout, a stray message,
  or a scan written before this job started: the output directories are read at start-up) goes
  into a new file ``..._counted_part<k>.h5``: the old file's frames plus the part's frames at
  positions the old one lacked, and the part's sectors an incomplete old frame lacked joined into
  that frame (a replay of what a receiver spilled: merged, the new file is never worse than the
  old), and the part's frames that add nothing at positions the old one had in another part file
  beside it. The record
  names the most complete file as ``path`` and the others as ``extra_paths``; a warning is logged.
- A run of a scan that brings no data (only info messages, or nothing before the scan timeout:
  a stray's, a replay's after a restart) writes nothing. For a scan with a file in the output
  directories, or a record this job gave, :meth:`ScanGatherer.write` returns :class:`Unchanged`
  and the scan's record and files stay as they were: a failure from a run that brought nothing
  never replaces a finished scan's record. Otherwise its record says failed.
- A write that fails (a full disk) tries ``second_output_dir``; if that fails too the scan stays
  pending and is retried every ``RETRY_INTERVAL_S`` for ``write_retry_s``, then (or at once when
  stopping) its record says failed with the reason. Nothing partial is left under a final name.

Metadata beyond stempy's:

- ``/metadata/completeness`` attrs outcome and reason (counted_file.py); outcome ``aborted`` when
  ``scans/<n>/abort`` was in the kvstore as the file was written
- ``/metadata/scan`` attrs: scan_number, frames_complete, frames_incomplete, missing_positions,
  timed_out, groups_expected, groups_reported, missing_groups (comma-separated uids),
  uncounted_frames, late_messages, evicted_frames, sectors_counted (per receiver),
  first_message_s, last_message_s, finished_s, written_s (Unix seconds), receive_s, scan_s (first
  message to written), background_thresholds_count_alike (False when the NodeGroups' thresholds lie
  on both sides of an integer ADU on uncorrected frames: ScanGatherer.thresholds_apart), and in a
  merged file merged_from (the file it extends)
- ``/virtual_images`` and ``/analysis`` (the outputs of the registered analyses the configuration
  runs, sectorflow.analysis): see ``sectorflow.consumer.counting.write_counted_scan``. A part file merged with an earlier file of the scan
  carries none (the earlier file's frames have none to merge); a part file of this job's parts
  alone carries theirs.
- ``/metadata/instrument/<quantity>`` attrs value, units, source: the scan's known instrument
  settings (scan step, detector pixel, camera length, beam energy, convergence angle, the angle a
  detector pixel spans; protocol/scan_instrument.py), from ``scans/<n>/instrument`` or the configuration.
- ``/metadata/nodegroups/<uid>`` attrs: per NodeGroup rank, host, expected and received messages
  per aggregator thread (-1: no info came), timed_out, frame counts and its own thresholds, and
  when some port heard more than one run of the scan (a stray's, a restarted relay's) ``runs``:
  rows of (port, run, expected, received), each run counted apart.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

import numpy as np

from sectorflow.analysis import PER_POSITION, Frames, Plan, Results, compute, kernel_values
from sectorflow.consumer.counting import (
    CountingError,
    read_counted_scan,
    statistics_dict,
    write_counted_scan,
)
from sectorflow.consumer.counting.counted_file_writer import CountedFileWriter
from sectorflow.errors import SectorflowError
from sectorflow.protocol import (
    OUTCOME_ABORTED,
    OUTCOME_COMPLETE,
    OUTCOME_FAILED,
    OUTCOME_INCOMPLETE,
    NodeGroupScanRecord,
    PortRun,
    ScanFileRecord,
)

from .output_dir import FileAccess, counted_files, next_part, scan_file_name

log = logging.getLogger(__name__)

#: Seconds between two tries of a file that could not be written.
RETRY_INTERVAL_S = 1.0
#: Tries of another part name when a name was taken meanwhile (another writer in the directory).
NAME_TRIES = 8
#: The reason, beside the others, of a scan an operator aborted (sectorflow abort); its file's outcome attribute says aborted.
ABORTED_REASON = "aborted by the operator (sectorflow abort)"
#: The events of a part (or a frame) written into the scan's file as it came: the memory is the file's.
IN_FILE = np.zeros(0, dtype=np.uint32)


@dataclass
class GroupResult:
    """One NodeGroup's part of a scan, with numpy arrays (events and offsets: views of the C++
    ScanResult's, which they keep alive, so a part is never held twice; pickled, they carry their data)."""

    uid: str
    rank: int
    host: str
    scan_number: int
    scan_x: int
    scan_y: int
    routing: list[str]
    positions: np.ndarray
    events: np.ndarray
    offsets: np.ndarray
    incomplete: dict[int, list[int]]
    thresholds_known: bool
    statistics: dict[str, Any]
    threshold_error: str
    expected: list[int]
    received: list[int]
    timed_out: bool
    bytes: int
    counts: dict[str, int] = field(default_factory=dict)
    sectors_counted: list[int] = field(default_factory=list)  # per receiver, in the frames counted
    evicted: bool = False
    # Every run heard, (port, run, expected, received), when some port heard more than one (a
    # stray's, a restarted relay's: protocol SPEC "Runs of a scan at the NodeGroups"); else empty.
    runs: list[tuple[int, int, int, int]] = field(default_factory=list)
    first_message_s: float = 0.0
    last_message_s: float = 0.0
    finished_s: float = 0.0
    # The analyses' outputs (sectorflow.analysis): per-position ones with a row per counted frame,
    # aligned with positions; empty without.
    images: dict[str, np.ndarray] = field(default_factory=dict)
    sums: dict[str, np.ndarray] = field(default_factory=dict)  # per-scan ones, summed over the part's frames
    # Per analysis that made outputs of the part: the frames it analysed, and the seconds its Python
    # from_events took (0 for a C++ kernel's: that time is the counting threads').
    analysed: dict[str, tuple[int, float]] = field(default_factory=dict)
    # This is piece ``piece`` of ``pieces`` of the part: each piece holds its positions' frames,
    # incomplete sectors and per-position outputs; the last one also the per-scan sums and the
    # part's account. A piece of frames counted while the scan ran (from_counted_frames) says
    # pieces 0: the part's number of pieces is not known yet, more follow.
    piece: int = 0
    pieces: int = 1

    @property
    def last(self) -> bool:
        """Whether this is the part's last piece (the part whole with the pieces before it)."""
        return self.pieces != 0 and self.piece == self.pieces - 1

    def split(self, max_events: int) -> list[GroupResult]:
        """The part (or this piece of it) as pieces of at most ``max_events`` events each (``[nodegroup]
        gather_piece_events``; a frame is never cut: a frame with more events is a piece of its own), in
        the part's position order, numbered on from this one's ``piece``; [self] when it fits. Rank 0
        holds one piece of another rank's part at a time."""
        if len(self.events) <= max_events:
            return [self]
        offsets = np.asarray(self.offsets, dtype=np.int64)
        bounds = [0]
        while bounds[-1] < len(self.positions):
            start = bounds[-1]
            end = int(np.searchsorted(offsets, offsets[start] + max_events, side="right")) - 1
            bounds.append(min(max(end, start + 1), len(self.positions)))
        pieces = []
        count = len(bounds) - 1
        for k, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
            positions = self.positions[start:end]
            taken = {int(p) for p in positions}
            pieces.append(dataclasses.replace(
                self, positions=positions, events=self.events[offsets[start]:offsets[end]],
                offsets=(offsets[start:end + 1] - offsets[start]).astype(np.uint64),
                incomplete={p: s for p, s in self.incomplete.items() if p in taken},
                images={name: values[start:end] for name, values in self.images.items()},
                sums=self.sums if k == count - 1 else {}, piece=self.piece + k,
                pieces=self.pieces - 1 + count if self.pieces else 0))
        return pieces

    def joined(self, piece: GroupResult) -> GroupResult:
        """This part (its pieces so far) with the next piece appended; the account (counts, timing)
        is the later piece's, as every piece carries the part's."""
        in_file = self.events is IN_FILE and piece.events is IN_FILE
        offsets = np.asarray(self.offsets, dtype=np.uint64)
        return dataclasses.replace(
            piece, positions=np.concatenate([self.positions, piece.positions]),
            events=IN_FILE if in_file else np.concatenate([self.events, piece.events]),
            offsets=np.concatenate([offsets, offsets[-1] + np.asarray(piece.offsets[1:], dtype=np.uint64)]),
            incomplete={**self.incomplete, **piece.incomplete},
            images={name: np.concatenate([self.images[name], piece.images[name]]) if name in self.images and
                    name in piece.images else self.images.get(name, piece.images.get(name))
                    for name in {**self.images, **piece.images}},
            sums={**self.sums, **piece.sums})

    @classmethod
    def from_scan_result(cls, result: Any, uid: str, rank: int, host: str, plan: Plan | None = None) -> GroupResult:
        """Copy a C++ ``ScanResult`` into a picklable result, with the outputs of ``plan``'s analyses
        (its C++ kernels' values, and those computed here from the part's events)."""
        return cls(
            uid=uid, rank=rank, host=host, scan_number=result.scan_number, scan_x=result.scan_x,
            scan_y=result.scan_y, routing=list(result.routing), positions=np.array(result.positions),
            events=np.asarray(result.events), offsets=np.asarray(result.offsets),
            incomplete={int(p): list(s) for p, s in zip(result.incomplete_positions,
                                                        result.incomplete_missing_sectors)},
            thresholds_known=result.thresholds_known,
            statistics=statistics_dict(result.statistics) if result.thresholds_known else {},
            threshold_error=result.threshold_error if result.uncounted_frames else "",
            expected=list(result.expected), received=list(result.received), timed_out=result.timed_out,
            bytes=result.bytes,
            counts={
                "frames_complete": result.frames_complete, "frames_incomplete": result.frames_incomplete,
                "uncounted_frames": result.uncounted_frames, "late_messages": result.late_messages,
                "duplicate_sectors": result.duplicate_sectors, "evicted_frames": result.evicted_frames,
            },
            sectors_counted=[int(n) for n in result.sectors_counted],
            evicted=result.evicted, runs=[(r.port, r.run, r.expected, r.received) for r in result.runs],
            first_message_s=result.first_message_s, last_message_s=result.last_message_s,
            finished_s=result.finished_s, **_outputs_of(result, plan),
        )

    @classmethod
    def from_counted_frames(cls, frames: Any, uid: str, rank: int, host: str, piece: int,
                            plan: Plan | None = None) -> GroupResult:
        """Frames a NodeGroup counted while their scan runs (a C++ ``ScanResult`` of frames only,
        ``NodeGroup.take_counted``) as piece ``piece`` of its part, more to follow (pieces 0): their
        events, positions, incomplete sectors and analysis outputs; no account (the part's last
        piece brings it, from the scan's result)."""
        return cls(
            uid=uid, rank=rank, host=host, scan_number=frames.scan_number, scan_x=frames.scan_x,
            scan_y=frames.scan_y, routing=[], positions=np.array(frames.positions),
            events=np.asarray(frames.events), offsets=np.asarray(frames.offsets),
            incomplete={int(p): list(s) for p, s in zip(frames.incomplete_positions,
                                                        frames.incomplete_missing_sectors)},
            thresholds_known=False, statistics={}, threshold_error="", expected=[], received=[], timed_out=False,
            bytes=0, piece=piece, pieces=0, **_outputs_of(frames, plan),
        )

    def scan_record(self) -> NodeGroupScanRecord:
        """``scans/<n>/nodegroup/<uid>``: this NodeGroup's account of its part."""
        return NodeGroupScanRecord(
            uid=self.uid, expected=[int(e) for e in self.expected], received=[int(r) for r in self.received],
            frames_complete=int(self.counts["frames_complete"]), frames_incomplete=int(self.counts["frames_incomplete"]),
            sectors_counted=int(sum(self.sectors_counted)), late=int(self.counts["late_messages"]),
            duplicates=int(self.counts["duplicate_sectors"]), timed_out=bool(self.timed_out), updated_s=time.time(),
            runs=[PortRun(port=port, run=run, expected=expected, received=received)
                  for port, run, expected, received in self.runs],
        )

    def describe(self) -> str:
        """One line: frames, timing, shortfall."""
        expected = sum(e for e in self.expected if e >= 0)
        unknown = sum(1 for e in self.expected if e < 0)
        return (
            f"scan {self.scan_number}: nodegroup {self.uid} done: {self.counts['frames_complete']} complete and "
            f"{self.counts['frames_incomplete']} incomplete frames, {sum(self.received)} of {expected} messages"
            f"{f' ({unknown} aggregator threads sent no count)' if unknown else ''}"
            f"{', closed early to make room for a newer scan ([limits] max_open_scans)' if self.evicted else ''}"
            f"{', timed out' if self.timed_out and not self.evicted else ''}"
            f"{self._shortfall()}"
        )

    def _shortfall(self) -> str:
        """Why frames are incomplete, when the pool had a part in it: what a user tunes pool_frames by."""
        c = self.counts
        parts = [f"{c[key]} {what}" for key, what in (
            ("evicted_frames", "frames counted early to free a pool slot"),
            ("late_messages", "sectors came after their frame was counted"),
            ("duplicate_sectors", "duplicate sectors dropped"),
        ) if c.get(key)]
        return f" ({', '.join(parts)})" if parts else ""


def _outputs_of(result: Any, plan: Plan | None) -> dict[str, Any]:
    """The outputs of ``plan``'s analyses for a C++ ``ScanResult``'s frames as GroupResult fields:
    the NodeGroup's C++ kernels' values where it made them, the rest computed here from the events."""
    if plan is None or len(result.positions) == 0:
        return {}
    values: dict[str, np.ndarray] = {}
    kernels_ran = result.imaged == len(result.positions)  # the NodeGroup made its virtual images
    for analysis in plan.analyses:
        if analysis.nodegroup_kernel and kernels_ran:
            values.update(kernel_values(analysis, result, plan.context))
    frames = Frames(np.asarray(result.positions), np.asarray(result.offsets), np.asarray(result.events))
    analysed = {a.name: (len(frames), 0.0) for a in plan.analyses if a.nodegroup_kernel and kernels_ran}
    for analysis in plan.analyses:
        if analysis.name not in analysed and analysis.from_events is not None:
            started = time.perf_counter()
            values.update(compute([analysis], frames, plan.context, skip_kernels=False))
            analysed[analysis.name] = (len(frames), time.perf_counter() - started)
    per = {o.name: o.per for o in plan.outputs()}
    return {"images": {n: v for n, v in values.items() if per.get(n) == PER_POSITION},
            "sums": {n: v for n, v in values.items() if n in per and per[n] != PER_POSITION}, "analysed": analysed}


@dataclass
class _Running:
    """A running scan's frames taken from its NodeGroup (RunningParts.take)."""

    pieces: int = 0                # pieces made of them so far
    positions: int = 0
    electrons: int = 0
    sums: dict[str, np.ndarray] = field(default_factory=dict)  # per-scan outputs over the frames taken
    analysed: dict[str, tuple[int, float]] = field(default_factory=dict)


class RunningParts:
    """One NodeGroup's parts of its running scans as pieces for rank 0, made while the scans run.

    The C++ NodeGroup hands out the frames its counting threads counted (``NodeGroup.take_counted``,
    ``NodeGroupSettings.drain_events``); :meth:`take` makes them pieces of at most ``piece_events``
    events each (a frame is never cut), numbered on, their number of pieces unknown (0); :meth:`part`
    makes the scan's result (the frames not taken, the part's account) its last piece, with the
    per-scan outputs summed over every piece. So a NodeGroup holds about a piece of a running scan,
    whatever its size, and rank 0 writes each piece into the scan's file as it comes.

    :param piece_events: ``[nodegroup] gather_piece_events``.
    """

    def __init__(self, uid: str, rank: int, host: str, plan: Plan | None, piece_events: int) -> None:
        self.uid, self.rank, self.host, self.plan = uid, rank, host, plan
        self.piece_events = piece_events
        self.scans: dict[int, _Running] = {}

    def take(self, group: Any) -> dict[int, list[GroupResult]]:
        """The pieces made of the frames ``group`` (a C++ NodeGroup) counted since, per scan: its
        frames of a scan once they hold ``piece_events`` events."""
        out: dict[int, list[GroupResult]] = {}
        for frames in group.take_counted(self.piece_events):
            running = self.scans.setdefault(frames.scan_number, _Running())
            taken = GroupResult.from_counted_frames(frames, self.uid, self.rank, self.host, running.pieces, self.plan)
            running.sums = _summed(running.sums, taken.sums)
            running.analysed = added_analyses(running.analysed, taken.analysed)
            running.positions += len(taken.positions)
            running.electrons += len(taken.events)
            taken.sums, taken.analysed = {}, {}  # the part's last piece carries them, summed
            pieces = taken.split(self.piece_events)
            running.pieces += len(pieces)
            out.setdefault(frames.scan_number, []).extend(pieces)
        return out

    def part(self, result: Any) -> tuple[GroupResult, int, int]:
        """A finished scan's result (a C++ ``ScanResult``) as its part's last piece, after those
        :meth:`take` made; with the part's positions and electrons (every piece's)."""
        running = self.scans.pop(result.scan_number, _Running())
        part = GroupResult.from_scan_result(result, self.uid, self.rank, self.host, self.plan)
        part.piece, part.pieces = running.pieces, running.pieces + 1
        part.sums = _summed(running.sums, part.sums)
        part.analysed = added_analyses(running.analysed, part.analysed)
        return part, running.positions + len(part.positions), running.electrons + len(part.events)

    def drop(self, scan_number: int) -> None:
        """Forget a scan whose part goes nowhere (refused)."""
        self.scans.pop(scan_number, None)


def _summed(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-scan outputs of two sets of frames, summed."""
    return {name: a[name] + b[name] if name in a and name in b else a.get(name, b.get(name)) for name in {**a, **b}}


def added_analyses(a: dict[str, tuple[int, float]], b: dict[str, tuple[int, float]]) -> dict[str, tuple[int, float]]:
    """Per analysis: frames analysed and seconds, summed."""
    zero = (0, 0.0)
    return {name: (a.get(name, zero)[0] + b.get(name, zero)[0], a.get(name, zero)[1] + b.get(name, zero)[1])
            for name in {**a, **b}}


@dataclass
class _Pending:
    results: dict[str, GroupResult] = field(default_factory=dict)
    pieces: dict[str, GroupResult] = field(default_factory=dict)  # a part whose last piece has not come, so far
    # monotonic time of the first whole part (pieces sent while the scan runs start no wait); None: none yet
    first_report: float | None = None
    failed_since: float | None = None  # monotonic time of the first failed write
    retry_at: float = 0.0


@dataclass
class _Stream:
    """A scan's file being written as its parts come: the parts in it hold no events in memory."""

    writer: CountedFileWriter
    scan_x: int
    scan_y: int
    uids: set[str] = field(default_factory=set)  # the NodeGroups whose frames are in the file


@dataclass
class _Scan:
    """A scan's counted frames, merged from its parts (and an earlier file), ready to be written."""

    scan_x: int
    scan_y: int
    events: list[Any]                  # per position: its events, or None (missing)
    incomplete: dict[int, list[int]]   # position: the sectors its frame lacked
    stored_reason: str | None = None   # of a file read back: the reason it was written with
    images: dict[str, np.ndarray] | None = None  # GroupResult.images' names, a row per position (NaN: none)
    sums: dict[str, np.ndarray] | None = None    # GroupResult.sums' names, summed over the frames

    @property
    def positions(self) -> int:
        return self.scan_x * self.scan_y

    def frames_written(self) -> int:
        return sum(1 for e in self.events if e is not None)

    def sectors_counted(self, receivers: int) -> list[int]:
        """Per receiver: its sectors in the frames written (an incomplete frame lacks some)."""
        written = self.frames_written()
        counted = [written] * receivers
        for sectors in self.incomplete.values():
            for sector in sectors:
                if 0 <= sector < receivers:
                    counted[sector] -= 1
        return counted


class WriteFailed(SectorflowError):
    """No output directory took the file."""


@dataclass(frozen=True)
class Unchanged:
    """A run that brought no data to a scan recorded before: nothing written, and the scan's
    ``scans/<n>/file`` record must stay as it is (``why`` says so, as logged)."""

    scan_number: int
    why: str


class ScanGatherer:
    """Rank 0's collection of GroupResults, writing each scan's file once it is whole.

    :param job_uids: every NodeGroup of this job (all ranks).
    :param output_dir: where the files go (checked at start-up by the service).
    :param frame_shape: (rows, cols) of a frame.
    :param gather_timeout_s: how long a scan waits for missing NodeGroups after its first report.
    :param counting: attributes for /metadata/electron_counting beside the statistics.
    :param receivers: sectors per frame (the file record counts each receiver's).
    :param second_output_dir: where a file goes that output_dir cannot take; None for nowhere.
    :param write_retry_s: how long a file that no directory took is retried before it fails.
    :param plan: the analyses the parts' outputs were made by (sectorflow.analysis.plan_of); None: none.
    :param sector_shape: (rows, cols) of a sector; None: ``receivers`` bands of whole rows (the 4D Camera's).
    :param access: the files' mode and group ([nodegroup] file_mode, file_group); by default the umask's.
    :param compression: the event datasets' filter ([nodegroup] compression).

    A scan's parts are written into its file as they come (:class:`CountedFileWriter`), and their
    events dropped from memory, so rank 0 holds one part at a time whatever the scan's size; the
    file gets its final name once the scan is whole. A part of a scan with a file on disk already,
    or one the file cannot take (another shape, a failed write), waits in memory as before: should
    the streamed file fail, its frames are read back and the scan written the old way.
    """

    def __init__(self, job_uids: list[str], output_dir: str | os.PathLike[str], frame_shape: tuple[int, int],
                 gather_timeout_s: float, counting: dict[str, Any] | None = None, receivers: int = 1,
                 second_output_dir: str | os.PathLike[str] | None = None, write_retry_s: float = 0.0,
                 plan: Plan | None = None, aborted: Callable[[int], bool] | None = None,
                 sector_shape: tuple[int, int] | None = None, access: FileAccess = FileAccess(),
                 instrument: Callable[[int], dict[str, dict[str, Any]]] | None = None,
                 compression: str = "none") -> None:
        self.job_uids = set(job_uids)
        self.compression = compression
        # Scans whose file is being written as their parts come.
        self.streams: dict[int, _Stream] = {}
        # The scan's known instrument settings, as /metadata/instrument holds them (ScanInstrument.known).
        self.instrument = instrument or (lambda _scan: {})
        self.access = access
        self.aborted = aborted or (lambda _scan: False)
        self.output_dir = Path(output_dir)
        self.directories = [self.output_dir] + ([Path(second_output_dir)] if second_output_dir else [])
        self.frame_shape = frame_shape
        self.gather_timeout_s = gather_timeout_s
        self.counting = counting or {}
        self.receivers = receivers
        self.sector_shape = sector_shape or (frame_shape[0] // max(receivers, 1), frame_shape[1])
        self.write_retry_s = write_retry_s
        self.plan = plan
        self.pending: dict[int, _Pending] = {}
        self.written: list[Path] = []
        # NodeGroups whose parts are in a file already, per scan this job wrote: a later part waits
        # only for the others.
        self.reported: dict[int, set[str]] = {}
        # Scans written before, by this job or an earlier one: a part for one of them is late.
        self.on_disk: dict[int, list[Path]] = counted_files(self.directories)
        # Scans this job gave a record (a failed one has no file): a later run bringing nothing keeps it.
        self.recorded: set[int] = set()

    def add(self, result: GroupResult) -> None:
        """Keep a NodeGroup's part of a scan, its frames written into the scan's file at once when
        the file can take them (its events then dropped)."""
        pending = self.pending.setdefault(result.scan_number, _Pending())
        replaced = pending.results.get(result.uid) if result.piece == 0 else None
        stream = self.streams.get(result.scan_number)
        if replaced is not None and stream is not None and result.uid in stream.uids:
            self._unstream(result.scan_number)  # the NodeGroup's earlier part is in the file: the old way
        if pending.failed_since is None:
            self._stream(result)
        if result.pieces != 1:
            so_far = pending.pieces.pop(result.uid, None) if result.piece else None
            result = result if so_far is None else so_far.joined(result)
            if not result.last:
                pending.pieces[result.uid] = result
                return
        pending.results[result.uid] = result
        if pending.first_report is None:
            pending.first_report = time.monotonic()

    def _stream(self, result: GroupResult) -> None:
        """Write the part's frames into its scan's file (opened by the first part), or leave it."""
        scan_number = result.scan_number
        if not (result.scan_x and result.scan_y and len(result.positions)) or self.on_disk.get(scan_number):
            return
        stream = self.streams.get(scan_number)
        if stream is None:
            for directory in self.directories:
                try:
                    writer = CountedFileWriter(
                        directory / scan_file_name(scan_number), scan_shape=(result.scan_y, result.scan_x),
                        frame_shape=self.frame_shape, compression=self.compression, mode=self.access.mode,
                        group=self.access.group)
                except OSError as error:
                    log.warning("scan %d: cannot write its file in %s as its parts come (%s)", scan_number, directory,
                                error.strerror or error)
                    continue
                stream = self.streams[scan_number] = _Stream(writer, result.scan_x, result.scan_y)
                break
            else:
                return  # the parts wait in memory; the write tries the directories again
        if (stream.scan_x, stream.scan_y) != (result.scan_x, result.scan_y):
            return  # another shape cannot share the file (the write leaves it out)
        try:
            stream.writer.add(result.positions, result.offsets, result.events)
        except (OSError, CountingError) as error:
            log.warning("scan %d: the part of %s could not go into its file as it came (%s): the scan's parts wait in "
                        "memory", scan_number, result.uid, error)
            self._unstream(scan_number)
            return
        stream.uids.add(result.uid)
        result.events = IN_FILE

    def _unstream(self, scan_number: int) -> None:
        """Give the streamed parts their events back from the file and drop the file: the scan is
        written the old way. Frames that cannot be read back are dropped from their parts (missing)."""
        stream = self.streams.pop(scan_number, None)
        if stream is None:
            return
        pending = self.pending.get(scan_number, _Pending())
        parts = [r for uid, r in [*pending.results.items(), *pending.pieces.items()] if uid in stream.uids]
        try:
            frames = stream.writer.frames()
            for part in parts:
                events = [frames[int(p)] for p in part.positions]
                part.events = np.concatenate(events).astype(np.uint32) if events else IN_FILE
                part.offsets = np.concatenate([[0], np.cumsum([len(e) for e in events])]).astype(np.uint64)
        except (OSError, KeyError, ValueError, RuntimeError) as error:
            log.error("scan %d: the frames written as they came cannot be read back (%s): those of %s are missing",
                      scan_number, error, ", ".join(sorted(stream.uids)))
            for part in parts:
                if part.events is IN_FILE:
                    part.positions = part.positions[:0]
                    part.offsets = np.zeros(1, dtype=np.uint64)
                    part.images = {name: values[:0] for name, values in part.images.items()}
        finally:
            stream.writer.discard()

    def _forget(self, scan_number: int) -> None:
        """Done with the scan: no longer pending, its unpublished file (if any) removed."""
        del self.pending[scan_number]
        stream = self.streams.pop(scan_number, None)
        if stream is not None:
            stream.writer.discard()

    def expected_groups(self, scan_number: int) -> set[str]:
        """The NodeGroups of this job the scan waits for."""
        return self.expected_groups_of(self.pending[scan_number])

    def ready(self, now: float | None = None, flush: bool = False) -> list[int]:
        """Scans that can be written: whole, waited long enough, or everything with ``flush``; a
        failed write again once its retry is due."""
        now = time.monotonic() if now is None else now
        out = []
        for scan_number, pending in sorted(self.pending.items()):
            if pending.failed_since is not None:
                if flush or now >= pending.retry_at:
                    out.append(scan_number)
                continue
            if pending.first_report is None:  # pieces of parts still counting: the scan runs
                if flush:
                    out.append(scan_number)
                continue
            whole = self.expected_groups(scan_number) <= set(pending.results)
            if whole or flush or now - pending.first_report >= self.gather_timeout_s:
                out.append(scan_number)
        return out

    def write(self, scan_number: int, final: bool = False) -> ScanFileRecord | Unchanged | None:
        """Merge the scan's parts and write its file; forget the scan once written or failed.

        :param final: the last try (the job stops): a failed write is not retried.
        :returns: the scan's file record; :class:`Unchanged` when the parts hold no data and the scan
            was recorded before (its record is not to be written again); None while a failed write
            waits for its retry.
        """
        pending = self.pending[scan_number]
        now = time.monotonic()
        if not pending.results:  # only pieces of parts whose NodeGroups stopped mid-scan: as if none came
            why = (f"scan {scan_number}: the parts of {', '.join(sorted(pending.pieces))} stopped before their "
                   "scan ended (pieces of frames counted while it ran came): nothing written")
            log.warning("%s", why)
            self._forget(scan_number)
            return Unchanged(scan_number, why)
        try:
            record = self._write(scan_number, pending)
        except WriteFailed as error:
            if pending.failed_since is None:
                pending.failed_since = now
            if not final and now - pending.failed_since < self.write_retry_s:
                pending.retry_at = now + RETRY_INTERVAL_S
                log.warning("scan %d: %s; retrying for %.0f s more", scan_number, error,
                            self.write_retry_s - (now - pending.failed_since))
                return None
            self._forget(scan_number)
            log.error("scan %d: no counted file: %s", scan_number, error)
            return self._recorded(scan_number, _failed(str(error)))
        except SectorflowError as error:
            self._forget(scan_number)
            log.error("%s", error)
            return self._recorded(scan_number, _failed(str(error)))
        self._forget(scan_number)
        return record if isinstance(record, Unchanged) else self._recorded(scan_number, record)

    def _recorded(self, scan_number: int, record: ScanFileRecord) -> ScanFileRecord:
        self.recorded.add(scan_number)
        return record

    def _write(self, scan_number: int, pending: _Pending) -> ScanFileRecord | Unchanged:
        expected_groups = self.expected_groups_of(pending)
        self.reported.setdefault(scan_number, set()).update(pending.results)
        results = [pending.results[uid] for uid in sorted(pending.results)]
        shaped = [r for r in results if r.scan_x and r.scan_y]
        if not shaped:
            unchanged = self._unchanged(scan_number, sorted(pending.results))
            if unchanged is not None:
                return unchanged
            raise SectorflowError(f"scan {scan_number}: no data message reached this job's NodeGroups "
                                  f"({', '.join(sorted(pending.results))}); nothing to write")
        scan_x, scan_y = shaped[0].scan_x, shaped[0].scan_y
        stream = self.streams.get(scan_number)
        for uid, so_far in pending.pieces.items():  # a rank that stopped sending mid-part: none of it is counted
            log.warning("scan %d: %d pieces of %s's part came, not its last: its part is left out", scan_number,
                        so_far.piece + 1, uid)
            if stream is not None and uid in stream.uids:
                try:
                    stream.writer.drop(so_far.positions)
                except OSError as error:
                    log.warning("scan %d: cannot empty %s's frames in its file (%s): the parts go the old way",
                                scan_number, uid, error)
                    self._unstream(scan_number)
                    stream = None
        if stream is not None and ((stream.scan_x, stream.scan_y) != (scan_x, scan_y) or any(
                r.uid not in stream.uids and len(r.positions) for r in shaped if (r.scan_x, r.scan_y) == (scan_x, scan_y))):
            self._unstream(scan_number)  # some part is not in the file: every part goes the old way
            stream = None
        scan = _Scan(scan_x, scan_y, [None] * (scan_x * scan_y), {})
        for r in results:
            if (r.scan_x, r.scan_y) != (scan_x, scan_y):
                continue  # a part of another shape cannot share the file (the tracker refuses it anyway)
            if stream is not None and r.uid in stream.uids:
                for position in r.positions:
                    scan.events[int(position)] = IN_FILE
            else:
                for i, position in enumerate(r.positions):
                    scan.events[int(position)] = r.events[r.offsets[i]:r.offsets[i + 1]]
            scan.incomplete.update(r.incomplete)
            _add_images(scan, r)
        missing_groups = sorted(expected_groups - set(pending.results))
        metadata = self._metadata(scan_number, scan, results, len(expected_groups), missing_groups)
        apart = self.thresholds_apart(results)
        metadata["scan"]["background_thresholds_count_alike"] = not apart
        if apart:
            log.warning("scan %d: %s", scan_number, apart)
        reasons = [f"NodeGroups {', '.join(missing_groups)} never reported"] if missing_groups else []
        if self.aborted(scan_number):
            reasons.insert(0, ABORTED_REASON)
        if any(r.timed_out for r in results):
            reasons.append("timed out ([nodegroup] scan_timeout_s)")
        if self.on_disk.get(scan_number):
            return self._write_later_part(scan_number, scan, metadata, reasons)
        path = self._create(scan_number, scan, metadata, reasons, [], stream)
        record = self._record(scan, path, [], reasons)
        scan_info = metadata["scan"]
        log.info(
            "scan %d: wrote %s: %d positions, %d complete, %d incomplete, %d missing frames; %d of %d NodeGroups%s%s; "
            "%.3f s from first message to file",
            scan_number, path.name, scan.positions, scan_info["frames_complete"], scan_info["frames_incomplete"],
            scan_info["missing_positions"], len(results), len(expected_groups),
            f" (missing {', '.join(missing_groups)})" if missing_groups else "",
            ", timed out" if scan_info["timed_out"] else "", scan_info["scan_s"],
        )
        return record

    def _unchanged(self, scan_number: int, uids: list[str]) -> Unchanged | None:
        """A run that brought no data to a scan with a file or a record already, or None. Such a run
        (a replay after the NodeGroups restarted) once recorded a good scan "failed, no file"."""
        files = self.on_disk.get(scan_number, [])
        if not files and scan_number not in self.recorded:
            return None
        kept = f"its files ({', '.join(f.name for f in files)}) and its record" if files else "its record"
        why = (f"scan {scan_number}: no data message reached this job's NodeGroups ({', '.join(uids)}) in this run; "
               f"nothing written: {kept} stay as they were")
        log.warning("%s", why)
        return Unchanged(scan_number, why)

    def _write_later_part(self, scan_number: int, scan: _Scan, metadata: dict[str, Any],
                          reasons: list[str]) -> ScanFileRecord:
        """A part of a scan already written: merged into a new file, never over the old one."""
        files = self.on_disk[scan_number]
        best, old = self._most_complete(files)
        new_positions = [p for p, e in enumerate(scan.events) if e is not None]
        if old is not None and (old.scan_x, old.scan_y) == (scan.scan_x, scan.scan_y):
            merged = _Scan(old.scan_x, old.scan_y, list(old.events), dict(old.incomplete))
            duplicates = _Scan(scan.scan_x, scan.scan_y, [None] * scan.positions, {})
            for p in new_positions:
                lacks = merged.incomplete.get(p, [])
                adds = [sector for sector in lacks if sector not in scan.incomplete.get(p, [])]
                if merged.events[p] is None:
                    merged.events[p] = scan.events[p]
                    if p in scan.incomplete:
                        merged.incomplete[p] = scan.incomplete[p]
                elif adds:  # a replay of sectors spilled after the frame's others were counted: one frame
                    merged.events[p] = self._joined(merged.events[p], scan.events[p], adds)
                    if still := [sector for sector in lacks if sector not in adds]:
                        merged.incomplete[p] = still
                    else:
                        del merged.incomplete[p]
                else:
                    duplicates.events[p] = scan.events[p]
                    if p in scan.incomplete:
                        duplicates.incomplete[p] = scan.incomplete[p]
        else:  # the old file cannot be read, or is of another shape: the part goes beside it whole
            merged, duplicates = None, scan
        path, final = best, old  # the scan's file stays the old one unless the part adds to it
        if merged is not None and old is not None and \
                sum(merged.sectors_counted(self.receivers)) > sum(old.sectors_counted(self.receivers)):
            added = sum(merged.sectors_counted(self.receivers)) - sum(old.sectors_counted(self.receivers))
            written = merged.frames_written()
            merged_meta = {**metadata, "scan": {
                **metadata["scan"], "merged_from": best.name,
                "frames_complete": np.int64(written - len(merged.incomplete)),
                "frames_incomplete": np.int64(len(merged.incomplete)),
                "missing_positions": np.int64(merged.positions - written),
                "sectors_counted": np.asarray(merged.sectors_counted(self.receivers), dtype=np.int64)}}
            path, final = self._create(scan_number, merged, merged_meta, reasons, files), merged
            log.warning("scan %d: a part came after its file was written: %d sectors merged with %s's into %s",
                        scan_number, added, best.name, path.name)
        if duplicates.frames_written():
            holds = [] if old is None else [f"a later part of positions {best.name} already holds"]
            beside = self._create(scan_number, duplicates, metadata, reasons + holds, files)
            log.warning("scan %d: a part came after its file was written with %d frames %s: written beside it as %s",
                        scan_number, duplicates.frames_written(),
                        f"and {best.name} cannot be read" if old is None else f"at positions {best.name} already holds",
                        beside.name)
            if old is None:  # nothing of the old file can be counted: the new part is the scan's file
                path, final = beside, duplicates
        elif path == best:
            log.warning("scan %d: a part came after its file was written and held no new frames; nothing written",
                        scan_number)
        assert final is not None
        extra = [f for f in self.on_disk[scan_number] if f != path]
        return self._record(final, path, extra, [] if final is old else reasons)

    def _joined(self, old: Any, new: Any, sectors: list[int]) -> np.ndarray:
        """One frame's events: the old frame's, and the new one's in ``sectors`` (those the old lacked)."""
        new = np.asarray(new, dtype=np.uint32)
        rows, cols = self.sector_shape
        grid_cols = max(self.frame_shape[1] // cols, 1)
        row, col = np.divmod(new.astype(np.int64), self.frame_shape[1])
        taken = new[np.isin((row // rows) * grid_cols + col // cols, sectors)]
        return np.sort(np.concatenate([np.asarray(old, dtype=np.uint32), taken]))

    def _most_complete(self, files: list[Path]) -> tuple[Path, _Scan | None]:
        """The scan's file holding the most frames (the latest of equals), read back."""
        best: tuple[int, Path, _Scan | None] | None = None
        for path in files:
            try:
                counted = read_counted_scan(path)
            except SectorflowError as error:
                log.warning("%s", error)
                if best is None:
                    best = (-1, path, None)
                continue
            rows, cols = counted.scan_shape
            missing = set(int(p) for p in counted.missing_positions)
            events = [None if p in missing else e for p, e in enumerate(counted.events)]
            incomplete = {int(p): [int(s) for s in sectors] for p, sectors in
                          zip(counted.incomplete_positions, counted.incomplete_missing_sectors)}
            old = _Scan(cols, rows, events, incomplete,
                        stored_reason=str(counted.metadata.get("completeness", {}).get("reason", "")))
            if best is None or old.frames_written() >= best[0]:
                best = (old.frames_written(), path, old)
        assert best is not None
        return best[1], best[2]

    def _create(self, scan_number: int, scan: _Scan, metadata: dict[str, Any], reasons: list[str],
                files: list[Path], stream: _Stream | None = None) -> Path:
        """Write a new file of the scan (never over one): the first free name in the first directory
        that takes it; with ``stream``, the file its parts went into as they came, finished (should
        that fail, the frames are read back and written the old way).

        :raises WriteFailed: no directory took it (each one's error in the message).
        """
        known = list(self.on_disk.get(scan_number, []))
        errors = []
        if stream is not None:
            try:
                return self._publish(scan_number, scan, metadata, reasons, stream, known)
            except OSError as error:
                errors.append(f"cannot write {stream.writer.directory / scan_file_name(scan_number)} "
                              f"({error.strerror or error})")
                log.warning("scan %d: %s; writing it again from its frames read back", scan_number, errors[-1])
                pending = self.pending.get(scan_number)
                self._unstream(scan_number)
                if pending is not None:  # the frames read back go where the streamed parts' were
                    for r in pending.results.values():
                        for i, position in enumerate(r.positions):
                            if scan.events[int(position)] is IN_FILE:
                                scan.events[int(position)] = r.events[r.offsets[i]:r.offsets[i + 1]]
                for position, events in enumerate(scan.events):
                    if events is IN_FILE:  # could not be read back: missing
                        scan.events[position] = None
                        scan.incomplete.pop(position, None)
        for directory in self.directories:
            for _ in range(NAME_TRIES):
                name = scan_file_name(scan_number, next_part(known + list(files)))
                try:
                    path = write_counted_scan(
                        directory / name, scan.events, scan_shape=(scan.scan_y, scan.scan_x),
                        frame_shape=self.frame_shape, statistics=metadata.get("statistics"),
                        incomplete=scan.incomplete, counting=self.counting,
                        metadata={k: v for k, v in metadata.items() if k != "statistics"},
                        outcome=OUTCOME_ABORTED if ABORTED_REASON in reasons else None if not reasons else OUTCOME_INCOMPLETE,
                        reason=_reason(scan, reasons),
                        analyses=self._results(scan), mode=self.access.mode, group=self.access.group,
                        compression=self.compression,
                    )
                except FileExistsError:
                    known.append(directory / name)  # someone else's: take the next part number
                    self.on_disk[scan_number] = known
                    continue
                except OSError as error:
                    errors.append(f"cannot write {directory / name} ({error.strerror or error})")
                    break
                known.append(path)
                self.on_disk[scan_number] = known
                self.written.append(path)
                return path
            else:
                errors.append(f"{directory}: every name taken")
        raise WriteFailed("; ".join(errors))

    def _publish(self, scan_number: int, scan: _Scan, metadata: dict[str, Any], reasons: list[str], stream: _Stream,
                 known: list[Path]) -> Path:
        """Finish the scan's streamed file and link it to the first free name of its directory.

        :raises OSError: the file could not be finished or linked, or every name was taken (it stays
            unpublished).
        """
        stream.writer.finish(
            statistics=metadata.get("statistics"), incomplete=scan.incomplete, counting=self.counting,
            metadata={k: v for k, v in metadata.items() if k != "statistics"},
            outcome=OUTCOME_ABORTED if ABORTED_REASON in reasons else None if not reasons else OUTCOME_INCOMPLETE,
            reason=_reason(scan, reasons), analyses=self._results(scan),
        )
        for _ in range(NAME_TRIES):
            path = stream.writer.directory / scan_file_name(scan_number, next_part(known))
            try:
                stream.writer.publish(path)
            except FileExistsError:
                known.append(path)  # someone else's: take the next part number
                self.on_disk[scan_number] = list(known)
                continue
            del self.streams[scan_number]
            self.on_disk[scan_number] = known + [path]
            self.written.append(path)
            return path
        raise OSError(f"{stream.writer.directory}: every name taken")

    def _results(self, scan: _Scan) -> Results | None:
        if self.plan is None or (scan.images is None and scan.sums is None):
            return None
        return Results(self.plan, {**(scan.images or {}), **(scan.sums or {})})

    def _record(self, scan: _Scan, path: Path, extra: list[Path], reasons: list[str]) -> ScanFileRecord:
        reason = scan.stored_reason or _reason(scan, reasons)
        return ScanFileRecord(
            outcome=OUTCOME_INCOMPLETE if reason else OUTCOME_COMPLETE, path=str(path), extra_paths=[str(p) for p in extra],
            positions=scan.positions, frames_written=scan.frames_written(),
            positions_missing=scan.positions - scan.frames_written(),
            sectors_counted=scan.sectors_counted(self.receivers), reason=reason, written_s=time.time(),
        )

    def thresholds_apart(self, results: list[GroupResult]) -> str:
        """Why the NodeGroups' background thresholds do not count alike, or "" when they do.

        Each NodeGroup samples its own frames, so their thresholds differ by the samples' noise (a
        few hundredths of an ADU). On uncorrected frames (no dark reference, no gain) pixel values
        are integers and two thresholds count alike exactly when their integer parts are equal;
        thresholds on both sides of an integer count the dark pixels of that value in one
        NodeGroup's frames and not in another's (29.987 and 30.026 were seen in one scan).
        """
        corrected = self.counting.get("dark_reference_applied") or self.counting.get("gain_applied")
        thresholds = {r.uid: float(r.statistics["background_threshold"]) for r in results
                      if r.thresholds_known and "background_threshold" in r.statistics}
        if corrected or len({math.floor(t) for t in thresholds.values()}) <= 1:
            return ""
        listed = ", ".join(f"{uid} {t:.3f}" for uid, t in sorted(thresholds.items()))
        return (f"the NodeGroups' background thresholds lie on both sides of an integer ADU ({listed}): pixels of "
                "that value are events in some NodeGroups' frames only; set [counting] background_threshold, or a "
                "background_sigma that puts the threshold away from an integer")

    def _metadata(self, scan_number: int, scan: _Scan, results: list[GroupResult], groups_expected: int,
                  missing_groups: list[str]) -> dict[str, Any]:
        # The file holds one set of thresholds: those of the first NodeGroup (by uid) that had
        # them; each group's own are under /metadata/nodegroups.
        statistics = next((r.statistics for r in results if r.thresholds_known), {})
        total = {key: sum(r.counts[key] for r in results) for key in results[0].counts}
        firsts = [r.first_message_s for r in results if r.first_message_s]
        lasts = [r.last_message_s for r in results if r.last_message_s]
        written_s = time.time()
        first_s = min(firsts) if firsts else 0.0
        return {
            "statistics": statistics,
            "scan": {
                "scan_number": np.int64(scan_number),
                "frames_complete": np.int64(total["frames_complete"]),
                "frames_incomplete": np.int64(total["frames_incomplete"]),
                "missing_positions": np.int64(scan.positions - scan.frames_written()),
                "uncounted_frames": np.int64(total["uncounted_frames"]),
                "late_messages": np.int64(total["late_messages"]),
                "evicted_frames": np.int64(total["evicted_frames"]),
                "sectors_counted": np.asarray(scan.sectors_counted(self.receivers), dtype=np.int64),
                "timed_out": any(r.timed_out for r in results),
                "groups_expected": np.int64(groups_expected),
                "groups_reported": np.int64(len(results)),
                "missing_groups": ",".join(missing_groups),
                "first_message_s": first_s,
                "last_message_s": max(lasts) if lasts else 0.0,
                "finished_s": max(r.finished_s for r in results),
                "written_s": written_s,
                "receive_s": (max(lasts) - first_s) if lasts else 0.0,
                "scan_s": written_s - first_s if first_s else 0.0,
            },
            # Each known quantity a group: attributes value, units and source (protocol/scan_instrument.py).
            **({"instrument": instrument} if (instrument := self.instrument(scan_number)) else {}),
            "nodegroups": {
                r.uid: {
                    "rank": np.int64(r.rank), "host": r.host, "timed_out": r.timed_out,
                    "expected": np.asarray(r.expected, dtype=np.int64),
                    "received": np.asarray(r.received, dtype=np.int64), "bytes": np.int64(r.bytes),
                    "threshold_error": r.threshold_error,
                    # (port, run, expected, received) rows, only when some port heard several runs.
                    **({"runs": np.asarray(r.runs, dtype=np.int64)} if r.runs else {}),
                    **{k: np.int64(v) for k, v in r.counts.items()},
                    **{k: r.statistics[k] for k in ("background_threshold", "x_ray_threshold") if k in r.statistics},
                }
                for r in results
            },
        }

    def expected_groups_of(self, pending: _Pending) -> set[str]:
        """The routing lists' NodeGroups that belong to this job, and whoever reported; for a
        scan already written by this job, less those whose parts are in its file."""
        results = list(pending.results.values())
        routing = set().union(*(set(r.routing) for r in results))
        before = self.reported.get(results[0].scan_number, set()) if results else set()
        return ((routing & self.job_uids) - before) | set(pending.results)


def _add_images(scan: _Scan, part: GroupResult) -> None:
    """Put a part's per-position outputs at its positions and add its per-scan ones."""
    positions = np.asarray(part.positions, dtype=np.int64)
    for name, values in part.images.items():
        if scan.images is None:
            scan.images = {}
        if name not in scan.images:  # every NodeGroup of a job runs the same analyses: the same names
            scan.images[name] = np.full((scan.positions, *np.shape(values)[1:]), np.nan, dtype=np.float32)
        scan.images[name][positions] = values
    for name, values in part.sums.items():
        if scan.sums is None:
            scan.sums = {}
        scan.sums[name] = values.astype(np.uint64) + (scan.sums[name] if name in scan.sums else np.uint64(0))


def _reason(scan: _Scan, reasons: list[str]) -> str:
    """Why the scan is incomplete: what its file lacks, then what else its writer knows; "" if complete."""
    missing = scan.positions - scan.frames_written()
    what = [f"{missing} of {scan.positions} positions missing"] if missing else []
    if scan.incomplete:
        what.append(f"{len(scan.incomplete)} frames incomplete")
    return "; ".join(what + reasons)


def _failed(reason: str) -> ScanFileRecord:
    return ScanFileRecord(outcome=OUTCOME_FAILED, path="", extra_paths=[], positions=0, frames_written=0,
                          positions_missing=0, sectors_counted=[], reason=reason, written_s=time.time())


__all__ = ["GroupResult", "RunningParts", "ScanGatherer", "Unchanged", "WriteFailed", "scan_file_name"]
