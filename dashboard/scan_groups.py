"""A replica's keys split by scan in one pass: ``scans/<n:010d>/...`` grouped per scan, the rest apart.

``sectorflow.operations.scan_account.records_of`` looks through the whole map for one scan; the dashboard
accounts many scans every update, so the follower groups the map once per update and every reader
of that update (the page's state, the images, the scan-duration histogram) takes its scans from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sectorflow._core.protocol import SCANS_PREFIX, scan_prefix

_DIGITS = len(scan_prefix(0)) - len(SCANS_PREFIX) - 1  # the zero-padded scan number


@dataclass(frozen=True)
class ScanGroups:
    """The keys that are no scan's record, and scan number -> that scan's keys."""

    others: dict[str, bytes]
    scans: dict[int, dict[str, bytes]]

    def newest(self, keep: int) -> ScanGroups:
        """Without the records of the scans older than the ``keep`` highest numbers."""
        return ScanGroups(self.others, {number: self.scans[number] for number in sorted(self.scans)[-keep:]})


def group_scans(entries: Mapping[str, bytes]) -> ScanGroups:
    """``entries`` grouped by scan in one pass.

    A ``scans/`` key whose number does not parse stays with the others, where the page shows it.
    """
    others: dict[str, bytes] = {}
    scans: dict[int, dict[str, bytes]] = {}
    start = len(SCANS_PREFIX)
    for key, raw in entries.items():
        digits = key[start:start + _DIGITS]
        if key.startswith(SCANS_PREFIX) and digits.isdigit() and key[start + _DIGITS:start + _DIGITS + 1] == "/":
            scans.setdefault(int(digits), {})[key] = raw
        else:
            others[key] = raw
    return ScanGroups(others, scans)
