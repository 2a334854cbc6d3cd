"""Aggregator options from a loaded configuration (``[aggregator]``, ``[[receivers]]``, ``[kvstore]``)."""

from __future__ import annotations

from collections.abc import Callable

from sectorflow._core.aggregator import AggregatorOptions
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import client_options
from sectorflow.protocol import NODEGROUPS_PREFIX
from sectorflow.security.options import aggregator_curves, aggregator_key_name
from sectorflow.socket_buffers import warn_if_capped


def aggregator_options(config: Config, log: Callable[[str], None] | None = None,
                       first_server: str = "", member: int = 0) -> AggregatorOptions:
    """One relay thread per receiver, fed by that receiver's producer threads.

    A NodeGroup of a routing list may be missing from the kvstore for as long as a replica may be
    silent (``silence_heartbeats`` x ``heartbeat_ms``) before its messages count as lost; a send
    blocked for ``[aggregator] send_timeout_ms`` declares its NodeGroup dead for the scan. Relay
    records (``scans/<n>/aggregator/t<r>``) live ``[kvstore] scan_record_ttl_s``.

    Args:
        config: the loaded configuration.
        log: called on the kvstore agent thread with each state change of the replica.
        first_server: the kvstore server of a pair the replicas talk to first (``client_options``).
        member: this aggregator's index in ``[aggregator] tier`` (0 with no tier).

    Raises:
        SectorflowError: ``member`` is not a member of the tier.
    """
    members = len(config.aggregator.hosts)
    if not 0 <= member < members:
        raise SectorflowError(f"aggregator member {member}: {config.source} has a tier of {members} "
                              f"([aggregator] tier), expected 0 to {members - 1}")
    kv = config.kvstore
    agg = config.aggregator
    options = AggregatorOptions(
        bind_host=agg.bind_host,
        base_port=agg.base_port,
        producer_threads=[receiver.threads for receiver in config.receivers],
        kvstore=client_options(config, NODEGROUPS_PREFIX, log, role="aggregator", first_server=first_server,
                               key_name=aggregator_key_name(config, member)),
        geometry=config.geometry(),
        max_scan_positions=config.limits.max_scan_positions,
        max_open_scans=config.limits.max_open_scans,
        hwm=agg.hwm,
        discovery_wait_ms=kv.silence_heartbeats * kv.heartbeat_ms,
        send_timeout_ms=agg.send_timeout_ms,
        scan_record_ttl_s=kv.scan_record_ttl_s,
        wire=[receiver.wire for receiver in config.receivers],
        native_scan_idle_ms=max(1, round(agg.native_scan_idle_s * 1000)),
    )
    options.member, options.members = member, members
    options.native_scans_requested = agg.native_scans_requested
    options.sndbuf_bytes = agg.sndbuf_bytes
    warn_if_capped("[aggregator] sndbuf_bytes", agg.sndbuf_bytes, "wmem_max")
    options.producers_curve, options.nodegroups_curve = aggregator_curves(config, member)
    return options
