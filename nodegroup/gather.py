"""Gathering the NodeGroups' parts of a scan on MPI rank 0 and writing the scan's file.

Each NodeGroup hands over a :class:`GroupResult` per scan (picklable: it crosses MPI). Rank 0
keeps a :class:`ScanGatherer`: a scan is ready when every NodeGroup of this job that is in the
scan's routing list has reported (routing lists come from the info messages, so a scan routed to
part of the job waits for that part only). A scan still waiting ``gather_timeout_s`` after its
first report is written with what came, the missing NodeGroups recorded.

The file is ``FOURD_<scan:010d>_counted.h5`` in the output directory (:func:`scan_file_name`),
written by :func:`sectorflow.counting.counted_file.write_counted_scan` under a temporary name and
renamed, so a file that exists is complete. Metadata beyond stempy's:

- ``/metadata/scan`` attrs: scan_number, frames_complete, frames_incomplete, missing_positions,
  timed_out, groups_expected, groups_reported, missing_groups (comma-separated uids),
  uncounted_frames, late_messages, evicted_frames, first_message_s, last_message_s, finished_s,
  written_s (Unix seconds), receive_s, scan_s (first message to written)
- ``/metadata/nodegroups/<uid>`` attrs: per NodeGroup rank, host, expected and received messages
  per aggregator thread (-1: no info came), timed_out, frame counts and its own thresholds.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sectorflow.errors import SectorflowError

from sectorflow.counting import statistics_dict, write_counted_scan

log = logging.getLogger(__name__)


def scan_file_name(scan_number: int) -> str:
    """The counted file of a scan: ``FOURD_<scan number, 10 digits>_counted.h5``."""
    return f"FOURD_{scan_number:010d}_counted.h5"


@dataclass
class GroupResult:
    """One NodeGroup's part of a scan, with numpy arrays that own their memory."""

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
    evicted: bool = False
    first_message_s: float = 0.0
    last_message_s: float = 0.0
    finished_s: float = 0.0

    @classmethod
    def from_scan_result(cls, result: Any, uid: str, rank: int, host: str) -> GroupResult:
        """Copy a C++ ``ScanResult`` into a picklable result."""
        return cls(
            uid=uid, rank=rank, host=host, scan_number=result.scan_number, scan_x=result.scan_x,
            scan_y=result.scan_y, routing=list(result.routing), positions=np.array(result.positions),
            events=np.array(result.events), offsets=np.array(result.offsets),
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
            evicted=result.evicted, first_message_s=result.first_message_s, last_message_s=result.last_message_s,
            finished_s=result.finished_s,
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


@dataclass
class _Pending:
    results: dict[str, GroupResult] = field(default_factory=dict)
    first_report: float = field(default_factory=time.monotonic)


class ScanGatherer:
    """Rank 0's collection of GroupResults, writing each scan's file once it is whole.

    :param job_uids: every NodeGroup of this job (all ranks).
    :param output_dir: where the files go (created if missing).
    :param frame_shape: (rows, cols) of a frame.
    :param gather_timeout_s: how long a scan waits for missing NodeGroups after its first report.
    :param counting: attributes for /metadata/electron_counting beside the statistics.
    """

    def __init__(self, job_uids: list[str], output_dir: str | os.PathLike[str], frame_shape: tuple[int, int],
                 gather_timeout_s: float, counting: dict[str, Any] | None = None) -> None:
        self.job_uids = set(job_uids)
        self.output_dir = Path(output_dir)
        self.frame_shape = frame_shape
        self.gather_timeout_s = gather_timeout_s
        self.counting = counting or {}
        self.pending: dict[int, _Pending] = {}
        self.written: list[Path] = []

    def add(self, result: GroupResult) -> None:
        """Keep a NodeGroup's part of a scan."""
        self.pending.setdefault(result.scan_number, _Pending()).results[result.uid] = result

    def expected_groups(self, scan_number: int) -> set[str]:
        """The NodeGroups of this job the scan waits for."""
        return self.expected_groups_of(self.pending[scan_number])

    def ready(self, now: float | None = None, flush: bool = False) -> list[int]:
        """Scans that can be written: whole, waited long enough, or everything with ``flush``."""
        now = time.monotonic() if now is None else now
        out = []
        for scan_number, pending in sorted(self.pending.items()):
            whole = self.expected_groups(scan_number) <= set(pending.results)
            if whole or flush or now - pending.first_report >= self.gather_timeout_s:
                out.append(scan_number)
        return out

    def write(self, scan_number: int) -> Path:
        """Merge the scan's parts and write its file; forget the scan.

        :raises SectorflowError: no part knows the scan shape (no data message came at all).
        """
        pending = self.pending.pop(scan_number)
        expected_groups = self.expected_groups_of(pending)
        results = [pending.results[uid] for uid in sorted(pending.results)]
        shaped = [r for r in results if r.scan_x and r.scan_y]
        if not shaped:
            raise SectorflowError(f"scan {scan_number}: no data message reached this job's NodeGroups "
                                  f"({', '.join(sorted(pending.results))}); nothing to write")
        scan_x, scan_y = shaped[0].scan_x, shaped[0].scan_y
        events: list[Any] = [None] * (scan_x * scan_y)
        incomplete: dict[int, list[int]] = {}
        for r in results:
            for i, position in enumerate(r.positions):
                events[int(position)] = r.events[r.offsets[i]:r.offsets[i + 1]]
            incomplete.update(r.incomplete)
        # The file holds one set of thresholds: those of the first NodeGroup (by uid) that had
        # them; each group's own are under /metadata/nodegroups.
        statistics = next((r.statistics for r in results if r.thresholds_known), {})
        missing_groups = sorted(expected_groups - set(pending.results))
        total = {key: sum(r.counts[key] for r in results) for key in results[0].counts}
        firsts = [r.first_message_s for r in results if r.first_message_s]
        lasts = [r.last_message_s for r in results if r.last_message_s]
        written_s = time.time()
        first_s = min(firsts) if firsts else 0.0
        metadata = {
            "scan": {
                "scan_number": np.int64(scan_number),
                "frames_complete": np.int64(total["frames_complete"]),
                "frames_incomplete": np.int64(total["frames_incomplete"]),
                "missing_positions": np.int64(sum(1 for e in events if e is None)),
                "uncounted_frames": np.int64(total["uncounted_frames"]),
                "late_messages": np.int64(total["late_messages"]),
                "evicted_frames": np.int64(total["evicted_frames"]),
                "timed_out": any(r.timed_out for r in results),
                "groups_expected": np.int64(len(expected_groups)),
                "groups_reported": np.int64(len(results)),
                "missing_groups": ",".join(missing_groups),
                "first_message_s": first_s,
                "last_message_s": max(lasts) if lasts else 0.0,
                "finished_s": max(r.finished_s for r in results),
                "written_s": written_s,
                "receive_s": (max(lasts) - first_s) if lasts else 0.0,
                "scan_s": written_s - first_s if first_s else 0.0,
            },
            "nodegroups": {
                r.uid: {
                    "rank": np.int64(r.rank), "host": r.host, "timed_out": r.timed_out,
                    "expected": np.asarray(r.expected, dtype=np.int64),
                    "received": np.asarray(r.received, dtype=np.int64), "bytes": np.int64(r.bytes),
                    "threshold_error": r.threshold_error,
                    **{k: np.int64(v) for k, v in r.counts.items()},
                    **{k: r.statistics[k] for k in ("background_threshold", "x_ray_threshold") if k in r.statistics},
                }
                for r in results
            },
        }
        self.output_dir.mkdir(parents=True, exist_ok=True)
        path = write_counted_scan(
            self.output_dir / scan_file_name(scan_number), events, scan_shape=(scan_y, scan_x),
            frame_shape=self.frame_shape, statistics=statistics, incomplete=incomplete, counting=self.counting,
            metadata=metadata,
        )
        self.written.append(path)
        scan = metadata["scan"]
        log.info(
            "scan %d: wrote %s: %d positions, %d complete, %d incomplete, %d missing frames; %d of %d NodeGroups%s%s; "
            "%.3f s from first message to file",
            scan_number, path.name, scan_x * scan_y, scan["frames_complete"], scan["frames_incomplete"],
            scan["missing_positions"], len(results), len(expected_groups),
            f" (missing {', '.join(missing_groups)})" if missing_groups else "",
            ", timed out" if scan["timed_out"] else "", scan["scan_s"],
        )
        return path

    def expected_groups_of(self, pending: _Pending) -> set[str]:
        """The routing lists' NodeGroups that belong to this job, and whoever reported."""
        routing = set().union(*(set(r.routing) for r in pending.results.values()))
        return (routing & self.job_uids) | set(pending.results)


__all__ = ["GroupResult", "ScanGatherer", "scan_file_name"]
