"""Reading the services' status records (``status/<service>/<name>``, kvstore/SPEC.md) out of a
replica's map: one walk for every reader (the client, `sectorflow status`, the dashboard and its
metrics), each deciding what to do with a record that does not decode."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import NamedTuple

from sectorflow._core import protocol as _records


class StatusEntry(NamedTuple):
    """One status key: its service and name and decoded record, or why it does not decode."""

    key: str
    service: str
    name: str
    status: _records.ServiceStatus | None
    error: str  # "" when the record decoded


def status_entries(entries: Mapping[str, bytes], service: str = "") -> Iterator[StatusEntry]:
    """Every status record of ``entries`` (of one service, or of all for ``service=""``), in key order."""
    prefix = _records.status_prefix(service)
    # Sorted after filtering: a replica holds far more scan records than statuses.
    for key, raw in sorted((key, raw) for key, raw in entries.items() if key.startswith(prefix)):
        try:
            service_of, name = _records.parse_status_key(key)
            yield StatusEntry(key, service_of, name, _records.ServiceStatus.decode(raw), "")
        except _records.ProtocolError as error:
            yield StatusEntry(key, "", "", None, str(error))


def describe_pair(entries: Mapping[str, bytes]) -> str:
    """One line of a kvstore pair (kvstore/SPEC.md, "The pair"), from the active server's status:
    which server is active, its peer's state, the failovers and splits it counted; "" for a single
    server (or a status that does not decode: the readers name it)."""
    raw = entries.get(_records.status_key(_records.SERVICE_KVSTORE, "server"))
    try:
        extra = _records.ServiceStatus.decode(raw).extra if raw is not None else {}
    except _records.ProtocolError:
        return ""
    if "pair_state" not in extra:
        return ""
    return (f"kvstore pair: the {extra.get('pair')} is {extra.get('pair_state')} (this server); its peer at "
            f"{extra.get('peer')} is {extra.get('peer_state')}; failovers {extra.get('failovers', 0)}, "
            f"splits {extra.get('splits', 0)}")
