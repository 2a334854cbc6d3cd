"""A replica's keys split by scan in one pass: ``scans/<n:010d>/...`` grouped per scan, the rest apart.

``sectorflow.scan_account.records_of`` looks through the whole map for one scan; the dashboard
accounts many scans every update, so it groups the map once and hands each scan only its keys.
"""

from __future__ import annotations

from collections.abc import Mapping

from sectorflow._core.protocol import SCANS_PREFIX, scan_prefix

_DIGITS = len(scan_prefix(0)) - len(SCANS_PREFIX) - 1  # the zero-padded scan number


def group_scans(entries: Mapping[str, bytes]) -> tuple[dict[str, bytes], dict[int, dict[str, bytes]]]:
    """(the keys that are no scan's record, scan number -> that scan's keys), in one pass.

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
    return others, scans


def newest_scans(entries: Mapping[str, bytes], keep: int) -> dict[str, bytes]:
    """``entries`` without the records of the scans older than the ``keep`` highest numbers."""
    others, scans = group_scans(entries)
    for number in sorted(scans)[-keep:]:
        others.update(scans[number])
    return others
