"""The Python face of the kvstore client: the C++ ``Client`` plus msgpack values and records.

Everything that talks to the network runs in the C++ agent thread; these methods only pack,
unpack and decode. Clients still open when the interpreter exits are closed by an ``atexit`` hook,
so their goodbye is sent and their agent never waits for a GIL that is going away.
"""

from __future__ import annotations

import atexit
import logging
import weakref
from typing import Any

import msgpack

from sectorflow._core import kvstore as _core
from sectorflow._core import protocol as _records
from sectorflow.configs import Config

from .options import client_options
from .status_records import status_entries

logger = logging.getLogger(__name__)

_open_clients: weakref.WeakSet[Client] = weakref.WeakSet()


class Client(_core.Client):
    """A live replica of the kvstore (see the package docstring for the semantics).

    Use it as a context manager, or call ``close()``: closing deletes this client's own keys.
    Change callbacks run on the agent thread, holding the GIL; keep them short.
    """

    def __init__(self, options: _core.ClientOptions, name: str = "client") -> None:
        super().__init__(options)
        self._name = name
        self._bad = _records.BadEntries()
        _open_clients.add(self)

    @classmethod
    def from_config(cls, config: Config, subtree: str = "", name: str = "client", role: str = "viewer",
                    key_name: str = "") -> Client:
        """A client of the configured server; its state changes are logged as ``kvstore <name>: ...``,
        a server of another stack than the last sync's as a warning (kvstore/SPEC.md, "The stack's identity").

        Args:
            config: the loaded configuration ([kvstore] host, port, heartbeat_ms, silence_heartbeats).
            subtree: key prefix the replica holds ("" for everything).
            name: who the client is, in log lines.
            role: the process's role ([security]): whose key it connects with, so what it may write.
            key_name: the pair ``<role>/<key_name>`` ("" the role's one pair; client_options).
        """

        def log(message: str) -> None:
            logger.info("kvstore %s: %s", name, message)

        def warn(message: str) -> None:
            logger.warning("kvstore %s: %s", name, message)

        return cls(client_options(config, subtree, log, role, warn, key_name=key_name), name)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_value(self, key: str, value: Any, ttl_s: float = 0.0) -> None:
        """``set`` with ``value`` packed by msgpack (any msgpack-able object)."""
        self.set(key, msgpack.packb(value, use_bin_type=True), ttl_s)

    def set_value_once(self, key: str, value: Any, ttl_s: float = 0.0) -> None:
        """``set_once`` with ``value`` packed by msgpack."""
        self.set_once(key, msgpack.packb(value, use_bin_type=True), ttl_s)

    def get_value(self, key: str, default: Any = None) -> Any:
        """The replica's value of ``key`` unpacked by msgpack, or ``default``."""
        raw = self.get(key)
        return default if raw is None else msgpack.unpackb(raw, raw=False)

    def values(self, prefix: str = "") -> dict[str, Any]:
        """Every key under ``prefix`` with its value unpacked by msgpack."""
        return {key: msgpack.unpackb(raw, raw=False) for key, raw in self.subtree(prefix).items()}

    def nodegroups(self) -> list[_records.NodeGroupRecord]:
        """The usable registered NodeGroups, sorted by uid (the routing order).

        A registration that does not decode is skipped, never raised: it is logged once (see
        ``bad_records``) and the others are returned.
        """
        listing = _records.nodegroups_from(self.subtree(_records.NODEGROUPS_PREFIX))
        self._report(_records.NODEGROUPS_PREFIX, listing.rejected)
        return listing.records

    def statuses(self, service: str = "") -> dict[tuple[str, str], _records.ServiceStatus]:
        """``(service, name) -> ServiceStatus`` of one service, or of all for ``service=""``.

        A status that does not decode (or whose key is not ``status/<service>/<name>``) is skipped,
        never raised: it is logged once (see ``bad_records``) and the others are returned.
        """
        prefix = _records.status_prefix(service)
        out, rejected = {}, {}
        for entry in status_entries(self.subtree(prefix), service):
            if entry.status is None:
                rejected[entry.key] = entry.error
            else:
                out[(entry.service, entry.name)] = entry.status
        self._report(prefix, rejected)
        return out

    @property
    def bad_records(self) -> int:
        """Entries ``nodegroups()`` and ``statuses()`` skipped so far, each key counted once per reason."""
        return self._bad.count

    def _report(self, prefix: str, rejected: dict[str, str]) -> None:
        for key, why in self._bad.note(prefix, rejected).items():
            logger.warning("kvstore %s: skipped %s, which does not decode: %s", self._name, key, why)


@atexit.register
def _close_open_clients() -> None:
    for client in list(_open_clients):
        client.close()
