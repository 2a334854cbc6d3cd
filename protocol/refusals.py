"""How a service publishes the messages it refused: one status field per kind, and the total.

The kinds are the C++ ``protocol::Refusal`` (``REFUSAL_KINDS``); the aggregator's relay threads and
the NodeGroups count the same kinds for the same reasons (SPEC.md, "Refusals"), so an operator
reads them alike in ``sectorflow status``.
"""

from __future__ import annotations

from collections.abc import Mapping

from sectorflow._core.protocol import REFUSAL_KINDS

#: The status field of the total: ``malformed``; of one kind: ``malformed_<kind>``.
TOTAL_FIELD = "malformed"


def refusal_fields(counts: Mapping[str, int]) -> dict[str, int]:
    """``{"malformed_<kind>": n, ..., "malformed": total}`` for every kind (absent kinds count 0)."""
    fields = {f"{TOTAL_FIELD}_{kind}": int(counts.get(kind, 0)) for kind in REFUSAL_KINDS}
    fields[TOTAL_FIELD] = sum(fields.values())
    return fields


__all__ = ["TOTAL_FIELD", "refusal_fields"]
