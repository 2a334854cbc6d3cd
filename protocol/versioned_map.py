"""The envelope of the stack's Python-encoded records (a scan's summary, its instrument settings):
one msgpack map carrying ``version``. Decoded once here, so every such record refuses the same bytes
with the same words."""

from __future__ import annotations

from typing import Any

import msgpack

from sectorflow.protocol import ProtocolError


def versioned_map(raw: bytes, what: str, version: int) -> dict[str, Any]:
    """The map ``raw`` holds, or ProtocolError ("<what>: ...") unless it is one msgpack map with
    ``version``."""
    try:
        value = msgpack.unpackb(raw, raw=False)
    except (ValueError, msgpack.UnpackException) as error:
        raise ProtocolError(f"{what}: not one msgpack object ({error})") from None
    if not isinstance(value, dict) or value.get("version") != version:
        raise ProtocolError(f"{what}: expected a map with version {version}, got {value!r:.80}")
    return value
