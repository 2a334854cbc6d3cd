"""Server and client options from a loaded configuration (the ``[kvstore]`` table).

The keys are mapped once, in C++ (kvstore/src/from_config.cpp); this module hands the configuration
over and adds what the process owns: its callbacks, the pair it runs as and its CURVE keys (a role's
fallback and a tier member's pair, which the C++ mapping of a receiver program does not know)."""

from __future__ import annotations

import os
from collections.abc import Callable

from sectorflow._core import kvstore as _core
from sectorflow._core.kvstore import ClientOptions, ServerOptions
from sectorflow.configs import Config, beamline_of
from sectorflow.errors import SectorflowError
from sectorflow.security.options import kvstore_client_curve, kvstore_server_curve


PAIR_ROLES = ("primary", "backup")


def pair_addresses(config: Config, role: str) -> tuple[str, str]:
    """This server's and its peer's "host:port" in ``[kvstore] servers`` (primary first) for ``role``.

    Raises:
        SectorflowError: the configuration lists no pair (one line naming the file).
    """
    servers = config.kvstore.servers
    if len(servers) != 2:
        raise SectorflowError(
            f"{config.source}: --pair {role} needs [kvstore] servers to list the pair, primary first "
            f"(\"host:port\" each); it lists {len(servers)}")
    primary, backup = servers
    return (primary, backup) if role == "primary" else (backup, primary)


def server_options(config: Config, pair: str = "") -> ServerOptions:
    """Where the server binds (``bind_host``, ports P..P+2), its heartbeat, its bounds and the
    receivers' producer threads (with [security] on, the only producer statuses it takes).

    ``pair``: "primary" or "backup" (``sectorflow kvstore --pair``): the server takes its P from its
    entry of ``[kvstore] servers`` and its peer from the other, and its durable records go to
    ``log_dir/<pair>`` (one directory per server, so one configuration describes both).
    """
    options = _core.server_options(beamline_of(config))
    if pair:
        own, peer = pair_addresses(config, pair)
        options.port = int(own.rpartition(":")[2])
        options.log_dir = os.path.join(config.kvstore.log_dir, pair) if config.kvstore.log_dir else ""
        peer_host, _, peer_port = peer.rpartition(":")
        options.pair_role = pair
        options.peer_host = peer_host
        options.peer_port = int(peer_port)
    options.curve = kvstore_server_curve(config, pair=bool(pair))
    return options


def client_options(
    config: Config, subtree: str = "", log: Callable[[str], None] | None = None, role: str = "viewer",
    warn: Callable[[str], None] | None = None, first_server: str = "", key_name: str = "",
) -> ClientOptions:
    """How a client reaches the server (``host``, port P, or the pair of ``servers``), when it declares it silent, what it may send.

    Args:
        config: the loaded configuration.
        subtree: key prefix the replica holds ("" for everything).
        log: called on the agent thread with each state change and resync.
        role: the process's role ([security]): whose key it connects with, so what it may write.
        warn: called on the agent thread when a sync finds the server another stack than the last
            (``log`` is, without it).
        first_server: with a pair, the server ("host:port") to talk to first, where another client
            of the process found the active (``Client.server``); "" starts at the primary.
        key_name: with [security], the pair ``<role>/<key_name>`` of the key directory ("" the
            role's one pair): a member of an aggregation tier whose host holds several members' pairs.
    """
    options = _core.client_options(beamline_of(config), subtree)
    if log is not None:
        options.set_log(log)
    if warn is not None:
        options.set_warn(warn)
    options.curve = kvstore_client_curve(config, role, key_name=key_name)
    if config.kvstore.servers:
        options.first_server = first_server
    return options
