"""A folded scan's summary: ``scans/<n:010d>/summary`` (kvstore/SPEC.md, "Folding").

When a scan is over (its request, every producer thread's final part, its file record) the kvstore
server replaces its parts by this one record, which it writes itself and no client may. It holds the
parts byte for byte, so a reader builds the scan's records (and its account) from it exactly as from
the parts: ``operations/scan_account.py``'s ``records_of`` reads either, and a part written after the
fold replaces the folded one, as it would replace the key.

Layout: one msgpack map ``{"version": 1, "folded_s": float, "parts": {part: bin}}``, ``part`` the key's
suffix after ``scans/<n:010d>/`` (``request``, ``producer/r0t1``, ...). The server's encoder is
protocol/src/scan_summary.cpp; ``encode`` here is for tests.
"""

from __future__ import annotations

import msgpack

from sectorflow.protocol import ProtocolError, scan_prefix
from sectorflow.protocol.versioned_map import versioned_map

VERSION = 1
SUMMARY_PART = "summary"


def summary_key(scan: int) -> str:
    return scan_prefix(scan) + SUMMARY_PART


def decode_parts(raw: bytes) -> dict[str, bytes]:
    """The parts a summary holds (part -> value); ProtocolError naming what is wrong."""
    value = versioned_map(raw, "ScanSummary", VERSION)
    parts = value.get("parts")
    if not isinstance(parts, dict) or not all(isinstance(k, str) and isinstance(v, bytes) for k, v in parts.items()):
        raise ProtocolError("ScanSummary: field 'parts': expected a map of part names to bytes")
    return parts


def encode(parts: dict[str, bytes], folded_s: float) -> bytes:
    return msgpack.packb({"version": VERSION, "folded_s": folded_s, "parts": parts}, use_bin_type=True)
