"""The bridge's status in the kvstore, ``status/libertem/<name>`` (libertem_bridge/SPEC.md, "Status"):
what ``sectorflow status``, the dashboard and a scan's account read about it, as they do every
other service's."""

from __future__ import annotations

import dataclasses
import socket
from typing import TYPE_CHECKING

from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.ownership import owner_fields
from sectorflow.protocol import SERVICE_LIBERTEM, STATE_IDLE, STATE_STREAMING, ServiceStatus, status_key
from sectorflow.security.options import key_directory, own_role

if TYPE_CHECKING:
    from .bridge import BridgeCounters
    from .server import AcquisitionServer

#: The kvstore role the bridge connects with: it reads as a viewer, and may write only its status.
ROLE = "viewer"


def status_name(config: Config) -> str:
    """The bridge's name in ``status/libertem/<name>``: with ``[security]`` on, the name of its key
    (the kvstore takes from a viewer only its own name's status, kvstore/SPEC.md "Security");
    without, this host's name.

    :raises SecurityError: no viewer or operator secret in the key directory.
    :raises SectorflowError: its public certificate is not beside it.
    """
    if not config.security.enabled:
        return socket.gethostname().split(".")[0] or "libertem"
    keys = key_directory(config)
    role = own_role(keys, ROLE)
    identity = keys.allowlist([role]).get(keys.own(role).public_key)
    if identity is None:
        # The name is the public certificate's (the kvstore's identity of the key): without it
        # here, this host cannot know what the kvstore calls it.
        raise SectorflowError(f"{keys.path}/{role}/: no public certificate (.key) beside this host's secret; "
                              f"copy it back from the beamline's key directory (sectorflow keys list)")
    return identity.partition("/")[2]


def bridge_status(counters: BridgeCounters, server: AcquisitionServer, scan: int | None) -> ServiceStatus:
    """The bridge's status: streaming while a scan (``scan``) is open or not yet read whole by a
    client it was sent to, else idle; ``messages`` counts the positions clients read, ``bytes`` the
    bytes they read."""
    fields = dataclasses.asdict(counters)
    last_scan = fields.pop("last_scan")
    fields.update(sent_fields(counters, server))
    extra: dict[str, bool | int | str] = {
        "client_connected": server.connected, "clients": len(server.clients()),
        "listen": f"{server.address[0]}:{server.address[1]}", **client_fields(server), **fields, **owner_fields()}
    if last_scan >= 0:
        extra["last_scan"] = last_scan
    else:
        for name in ("last_scan_served", "last_scan_positions", "last_scan_empty"):
            del extra[name]
    current = scan if scan is not None else max(last_scan, 0)
    return ServiceStatus(state=STATE_STREAMING if scan is not None else STATE_IDLE, scan=current,
                         messages=server.delivered.positions, bytes=server.bytes_sent, extra=extra)


def client_fields(server: AcquisitionServer) -> dict[str, int]:
    """What became of the clients that connected."""
    return {"clients_denied": server.clients_denied, "clients_refused": server.clients_refused,
            "clients_dropped": server.clients_dropped, "clients_gone": server.clients_gone}


def sent_fields(counters: BridgeCounters, server: AcquisitionServer) -> dict[str, int]:
    """What clients got of what the bridge released: positions and frames a client read whole (per
    client), and the frames that did not reach one (never queued, or queued and discarded unread
    with their client)."""
    return {"positions_sent": server.delivered.positions, "frames_sent": server.delivered.frames,
            "frames_unsent": counters.frames_unsent + server.discarded_gone.frames,
            "frames_dropped": counters.frames_dropped + server.discarded_dropped.frames}


class StatusPublisher:
    """Publishes the bridge's status when it changed, and every heartbeat so that it never expires
    while the bridge runs; the last one (``final``) says stopped."""

    def __init__(self, config: Config, client: Client) -> None:
        self.client = client
        self.key = status_key(SERVICE_LIBERTEM, status_name(config))
        self.ttl_s = config.kvstore.ttl_s
        self.heartbeat_s = config.kvstore.heartbeat_ms / 1000
        self._published: tuple[object, ...] | None = None
        self._at = 0.0

    def publish(self, status: ServiceStatus, now: float, force: bool = False) -> None:
        fingerprint = (status.state, status.scan, status.messages, status.bytes, tuple(sorted(status.extra.items())))
        if force or fingerprint != self._published or now - self._at >= self.heartbeat_s:
            self.client.set(self.key, status.encode(), self.ttl_s)
            self._published, self._at = fingerprint, now
