"""Server and client options from a loaded configuration (the ``[kvstore]`` table)."""

from __future__ import annotations

from collections.abc import Callable

from sectorflow._core.kvstore import ClientOptions, ServerOptions
from sectorflow.configs import Config
from sectorflow.security.options import kvstore_client_curve, kvstore_server_curve


def server_options(config: Config) -> ServerOptions:
    """Where the server binds (``bind_host``, ports P..P+2), its heartbeat and its bounds."""
    kv = config.kvstore
    options = ServerOptions(
        bind_host=kv.bind_host,
        port=kv.port,
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
        log_dir=kv.log_dir,
        log_fsync=kv.log_fsync,
        log_fsync_interval_ms=kv.log_fsync_interval_ms,
        log_max_bytes=kv.log_max_bytes,
    )
    options.curve = kvstore_server_curve(config)
    return options


def client_options(
    config: Config, subtree: str = "", log: Callable[[str], None] | None = None, role: str = "viewer",
    warn: Callable[[str], None] | None = None,
) -> ClientOptions:
    """How a client reaches the server (``host``, port P, or the pair of ``servers``), when it declares it silent, what it may send.

    Args:
        config: the loaded configuration.
        subtree: key prefix the replica holds ("" for everything).
        log: called on the agent thread with each state change and resync.
        role: the process's role ([security]): whose key it connects with, so what it may write.
        warn: called on the agent thread when a sync finds the server another stack than the last
            (``log`` is, without it).
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
    options.curve = kvstore_client_curve(config, role)
    return options
