"""Server and client options from a loaded configuration (the ``[kvstore]`` table)."""

from __future__ import annotations

import os
from collections.abc import Callable

from sectorflow._core.kvstore import ClientOptions, ServerOptions
from sectorflow.configs import Config
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
    kv = config.kvstore
    port, log_dir, peer = kv.port, kv.log_dir, ""
    if pair:
        own, peer = pair_addresses(config, pair)
        port = int(own.rpartition(":")[2])
        log_dir = os.path.join(kv.log_dir, pair) if kv.log_dir else ""
    options = ServerOptions(
        bind_host=kv.bind_host,
        port=port,
        heartbeat_ms=kv.heartbeat_ms,
        max_value_bytes=kv.max_value_bytes,
        max_keys=kv.max_keys,
        max_map_bytes=kv.max_map_bytes,
        max_keys_per_address=kv.max_keys_per_address,
        max_map_bytes_per_address=kv.max_map_bytes_per_address,
        max_stack_keys=kv.max_stack_keys,
        max_stack_bytes=kv.max_stack_bytes,
        max_ttl_s=kv.max_ttl_s,
        scans_kept=kv.scans_kept,
        log_dir=log_dir,
        log_fsync=kv.log_fsync,
        log_fsync_interval_ms=kv.log_fsync_interval_ms,
        log_max_bytes=kv.log_max_bytes,
    )
    options.curve = kvstore_server_curve(config, pair=bool(pair))
    options.producer_threads = [receiver.threads for receiver in config.receivers]
    if pair:
        peer_host, _, peer_port = peer.rpartition(":")
        options.pair_role = pair
        options.peer_host = peer_host
        options.peer_port = int(peer_port)
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
    kv = config.kvstore
    options = ClientOptions(
        host=kv.host,
        port=kv.port,
        servers=list(kv.servers),
        subtree=subtree,
        heartbeat_ms=kv.heartbeat_ms,
        silence_heartbeats=kv.silence_heartbeats,
        log=log,
        warn=warn,
        max_value_bytes=kv.max_value_bytes,
        max_ttl_s=kv.max_ttl_s,
    )
    options.curve = kvstore_client_curve(config, role, key_name=key_name)
    if kv.servers:
        options.first_server = first_server
    return options
