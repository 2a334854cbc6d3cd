"""Whether ``sectorflow acquire --replay`` of a scan has anything to stream and anyone to count it.

A replay streams a scan's raw files again (each producer thread reads its receiver's files in
``[producer] fallback_dir``, ``find_replay_files``) to the registered NodeGroups, whose rank 0 adds
what comes to the scan's file. ``acquire`` asks here before it writes anything, so that a refused
replay leaves the scan's records and file as they were. A replay is refused

- when the scan's file record says it was counted complete: nothing is left to count;
- when no raw file of the scan is known: no producer record of it says a thread spilled or wrote
  it to disk (or, for a replay, streamed from its files, which a replay leaves in place), and
  ``fallback_dir`` on this host holds none. Every producer would stream nothing, and the NodeGroups
  would record the scan as failed with no file;
- when a routed NodeGroup counted part of the scan already: a NodeGroup remembers the scans it
  counted and refuses another count (docs/fault-model.md), so the replay would wait for a file
  that never comes. The next NodeGroup job (a new streaming session) takes it.

The first two are about the scan named (a bad ``--scan-number`` for ``--replay``, exit 2), the
third about the stack as it runs now.
"""

from __future__ import annotations

from pathlib import Path

from sectorflow.protocol import OUTCOME_COMPLETE, RawFileError, find_replay_files

from sectorflow.operations.scan_account import SOURCE_REPLAY, ScanRecords


def raw_files_known(records: ScanRecords, fallback_dir: str) -> bool:
    """Whether some raw file of the scan is known: from its producer records, or on this host.

    The records speak for every receiver, wherever it runs; the directory only for receivers on
    this host (it is where they write, ``[producer] fallback_dir``), whose records may be gone.
    """
    if any(part.spilled > 0 for part in records.producers.values()):
        return True
    if (records.request is not None and records.request.source == SOURCE_REPLAY
            and any(part.sent > 0 for part in records.producers.values())):
        return True
    if not Path(fallback_dir).is_dir():
        return False
    try:
        return bool(find_replay_files(fallback_dir, records.scan))
    except RawFileError:
        return False  # a directory that cannot be listed shows nothing; the refusal names it


def replay_refusal(records: ScanRecords, fallback_dir: str) -> str | None:
    """Why the scan named cannot be replayed (one line), or None when its replay may go."""
    scan = records.scan
    if records.file is not None and records.file.outcome == OUTCOME_COMPLETE:
        where = f" into {records.file.path}" if records.file.path else ""
        return (f"scan {scan} was counted complete{where}: nothing to replay (--replay streams the raw files of a "
                "scan that was spilled or written to disk)")
    if not raw_files_known(records, fallback_dir):
        return (f"scan {scan} has no raw files to replay: no producer record of it says a receiver spilled or wrote "
                f"it to disk, and {fallback_dir} ([producer] fallback_dir) on this host holds none")
    return None


def counted_already_by(records: ScanRecords, routing: list[str]) -> list[str]:
    """The NodeGroups of ``routing`` that recorded a part of the scan: they would refuse the replay's."""
    return sorted(set(routing) & set(records.nodegroups))


__all__ = ["counted_already_by", "raw_files_known", "replay_refusal"]
