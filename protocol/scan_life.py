"""A scan's life beside its records: the claim of its number and its abort (kvstore/SPEC.md, "Keys and records").

``scans/<n:010d>/claim`` (ScanClaim) is written by ``sectorflow acquire`` with the kvstore's create-only
write (``Client.create_once``): the server takes the first claim of a number and refuses the others,
so of two acquires that pick one number at once exactly one gets it, and each reads back whose claim
the key holds. ``scans/<n:010d>/abort`` (ScanAbort) is written by ``sectorflow abort N``: the producer
threads stop sending the scan, NodeGroups' rank 0 marks its file aborted, and the account says
"aborted" with what was counted before.

Both are msgpack maps with ``version`` = 1; the decoders check every field and raise ProtocolError
naming the record and the field, like the C++ records'.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

import msgpack

from sectorflow.protocol import ProtocolError, scan_prefix, wall_clock_s

VERSION = 1
# Bounds of a claimant or an operator's name: the records stay small whatever a writer sends.
MAX_NAME_BYTES = 256


def claim_key(scan: int) -> str:
    return scan_prefix(scan) + "claim"


def abort_key(scan: int) -> str:
    return scan_prefix(scan) + "abort"


def who() -> str:
    """This process, for a record: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _fields(record: str, raw: bytes, fields: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    try:
        value = msgpack.unpackb(raw, raw=False)
    except (ValueError, msgpack.UnpackException) as error:
        raise ProtocolError(f"{record}: not one msgpack object ({error})") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"{record}: expected a map, got {type(value).__name__}")
    if value.get("version") != VERSION:
        raise ProtocolError(f"{record}: version {value.get('version')!r}, expected {VERSION}")
    out = {}
    for name, kind in fields.items():
        field_value = value.get(name)
        if not isinstance(field_value, kind) or isinstance(field_value, bool):
            raise ProtocolError(f"{record}: field {name!r}: expected {kind}, got {field_value!r:.80}")
        if isinstance(field_value, str) and not 0 < len(field_value.encode()) <= MAX_NAME_BYTES:
            raise ProtocolError(f"{record}: field {name!r}: 1 to {MAX_NAME_BYTES} bytes of text expected")
        out[name] = field_value
    return out


@dataclass(frozen=True)
class ScanClaim:
    """Who took a scan number: ``claimant`` is unique per acquire process and attempt."""

    claimant: str
    claimed_s: float

    @classmethod
    def new(cls) -> ScanClaim:
        return cls(f"{who()}:{uuid.uuid4().hex}", wall_clock_s())

    def encode(self) -> bytes:
        return msgpack.packb({"version": VERSION, "claimant": self.claimant, "claimed_s": self.claimed_s})

    @classmethod
    def decode(cls, raw: bytes) -> ScanClaim:
        return cls(**_fields("ScanClaim", raw, {"claimant": str, "claimed_s": (float, int)}))


@dataclass(frozen=True)
class ScanAbort:
    """An operator's abort of a scan: by whom (``host:pid`` of ``sectorflow abort``) and when."""

    by: str
    requested_s: float

    def encode(self) -> bytes:
        return msgpack.packb({"version": VERSION, "by": self.by, "requested_s": self.requested_s})

    @classmethod
    def decode(cls, raw: bytes) -> ScanAbort:
        return cls(**_fields("ScanAbort", raw, {"by": str, "requested_s": (float, int)}))
