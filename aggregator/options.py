"""Aggregator options from a loaded configuration.

The keys are mapped once, in C++ (aggregator/src/from_config.cpp); this module hands the
configuration over and adds what the process owns: its kvstore client (with its log callback, the
server of a pair it talks to first and the tier member's key) and its CURVE servers.
"""

from __future__ import annotations

from collections.abc import Callable

from sectorflow._core import aggregator as _core
from sectorflow._core.aggregator import AggregatorOptions
from sectorflow.configs import Config, beamline_of
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
        ConfigError: ``member`` is not a member of the tier.
    """
    options = _core.aggregator_options(beamline_of(config), member)
    options.kvstore = client_options(config, NODEGROUPS_PREFIX, log, role="aggregator", first_server=first_server,
                                     key_name=aggregator_key_name(config, member))
    warn_if_capped("[aggregator] sndbuf_bytes", config.aggregator.sndbuf_bytes, "wmem_max")
    options.producers_curve, options.nodegroups_curve = aggregator_curves(config, member)
    return options
