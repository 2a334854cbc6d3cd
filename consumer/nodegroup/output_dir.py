"""Where rank 0 writes counted files: the output directories, checked at start-up, and the files
already in them.

A job that cannot write its files must not take scans: :func:`check_writable` creates the
directory if needed and writes and removes a probe file, so that ``sectorflow nodegroup`` fails
with one line before any NodeGroup registers. :func:`counted_files` lists the counted files a
directory already holds, so that a restarted job knows which scans were written (a later part of
one of them goes beside it, never over it).

File names: ``FOURD_<scan:010d>_counted.h5`` for a scan's first file, ``FOURD_<scan:010d>_counted_part<k>.h5``
(k = 2, 3, ...) for what came later (:func:`scan_file_name`).
"""

from __future__ import annotations

import grp
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sectorflow.errors import SectorflowError

_COUNTED = re.compile(r"FOURD_(\d{10})_counted(?:_part(\d+))?\.h5")


def scan_file_name(scan_number: int, part: int = 1) -> str:
    """The counted file of a scan: ``FOURD_<scan number, 10 digits>_counted.h5``; later parts
    ``..._counted_part<k>.h5``."""
    suffix = "" if part <= 1 else f"_part{part}"
    return f"FOURD_{scan_number:010d}_counted{suffix}.h5"


def parse_file_name(name: str) -> tuple[int, int] | None:
    """(scan number, part) of a counted file's name (part 1: the first file), or None."""
    match = _COUNTED.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 1)


@dataclass(frozen=True)
class FileAccess:
    """Who may read the counted files: ``[nodegroup] file_mode`` and ``file_group`` resolved
    (None: the umask's bits, the writer's group)."""

    mode: int | None = None
    group: int | None = None

    @classmethod
    def from_config(cls, mode: int | None, group: str) -> FileAccess:
        """``group`` a name or number; raises SectorflowError naming the key for an unknown name."""
        if not group:
            return cls(mode, None)
        if group.isdigit():
            return cls(mode, int(group))
        try:
            return cls(mode, grp.getgrnam(group).gr_gid)
        except KeyError:
            raise SectorflowError(f"[nodegroup] file_group {group!r}: no such group on this host; name one the "
                                  "NodeGroups' user belongs to, or '' to keep the user's") from None


def check_writable(directory: Path, key: str, access: FileAccess = FileAccess()) -> None:
    """Create ``directory`` if missing and prove it writable with a probe file, given the
    counted files' mode and group (``access``).

    :param key: the option that names it, for the error.
    :raises SectorflowError: it cannot be created or written, one line saying why.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SectorflowError(f"{key} {directory}: cannot create it ({error.strerror or error}); "
                              "no NodeGroup registered") from None
    try:
        handle, probe = tempfile.mkstemp(prefix=".sectorflow-probe-", dir=directory)
        try:
            os.write(handle, b"probe")
            os.fsync(handle)
            if access.mode is not None:
                os.fchmod(handle, access.mode)
            if access.group is not None:
                try:
                    os.fchown(handle, -1, access.group)
                except OSError as error:
                    raise SectorflowError(
                        f"[nodegroup] file_group: cannot give a file in {directory} the group {access.group} "
                        f"({error.strerror or error}): the NodeGroups' user must belong to it; no NodeGroup "
                        "registered") from None
        finally:
            os.close(handle)
            os.unlink(probe)
    except OSError as error:
        raise SectorflowError(f"{key} {directory}: cannot write there ({error.strerror or error}); "
                              "no NodeGroup registered") from None


def counted_files(directories: list[Path]) -> dict[int, list[Path]]:
    """The counted files already in ``directories``, by scan number, each scan's in part order."""
    found: dict[int, list[tuple[int, Path]]] = {}
    for directory in directories:
        if not directory.is_dir():
            continue
        for path in directory.iterdir():
            parsed = parse_file_name(path.name)
            if parsed is not None:
                found.setdefault(parsed[0], []).append((parsed[1], path))
    return {scan: [path for _, path in sorted(files)] for scan, files in found.items()}


def next_part(files: list[Path]) -> int:
    """The part number of a scan's next file, given the files it has."""
    parts = [parsed[1] for parsed in (parse_file_name(p.name) for p in files) if parsed is not None]
    return max(parts, default=0) + 1


__all__ = ["FileAccess", "check_writable", "counted_files", "next_part", "parse_file_name", "scan_file_name"]
