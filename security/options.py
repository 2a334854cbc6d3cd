"""The CURVE settings of every socket, from the ``[security]`` table and the key directory.

With ``[security] enabled = false`` every function returns settings that are off (plain TCP).
Which roles each listener accepts is the design's (protocol/SPEC.md, "Security"), not the files':
the kvstore accepts every role (what each may write is checked per key), the aggregator's
producer ports accept producers, and the aggregator accepts NodeGroups on its connections to them.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from sectorflow._core.security import CurveClient, CurveServer, KeyDirectory, tier_member_key_name
from sectorflow.configs import Config

logger = logging.getLogger(__name__)

# ZAP domains: one allowlist each (security/include/sectorflow/security/zap_handler.hpp).
DOMAIN_KVSTORE = "kvstore"
DOMAIN_PRODUCERS = "producers"
DOMAIN_NODEGROUPS = "nodegroups"
DOMAIN_LIVE = "live"
# Who may watch a NodeGroup's live stream: the roles that read (the dashboard reads as a viewer).
LIVE_ROLES = ("viewer", "operator")
# Every role that connects to the kvstore (the server's own key is role "kvstore").
CLIENT_ROLES = ("producer", "aggregator", "nodegroup", "operator", "viewer")
# A role whose secret may stand in when a host has none of the role asked for: a host that may
# command may also look.
FALLBACK_ROLE = {"viewer": "operator"}


def with_key_dir(config: Config, key_dir: str | Path) -> Config:
    """``config`` with ``[security] key_dir`` replaced (a streaming session's private key directory)."""
    return dataclasses.replace(config, security=dataclasses.replace(config.security, key_dir=str(key_dir)))


def key_directory(config: Config, key_dir: str | Path | None = None) -> KeyDirectory:
    """The key directory of ``config`` (``[security] key_dir``), or ``key_dir`` when given.

    Raises:
        SecurityError: the directory does not exist.
    """
    return KeyDirectory(str(key_dir if key_dir is not None else config.security.key_dir))


def own_role(keys: KeyDirectory, role: str) -> str:
    """``role``, or its fallback when this host holds no secret of ``role`` but one of the fallback."""
    fallback = FALLBACK_ROLE.get(role)
    if fallback is not None and not keys.has_own(role) and keys.has_own(fallback):
        return fallback
    return role


def kvstore_server_curve(config: Config, pair: bool = False) -> CurveServer:
    """The kvstore server's sockets: its own pair, every client role's public keys.

    ``pair``: a server of a Binary Star pair also admits the kvstore role's key, its peer's (both hold
    the one pair of ``<key_dir>/kvstore/``): the peer mirrors through P and P + 1, and the server
    admits that key alone on its peer link (kvstore/SPEC.md, "Security"), writes of it refused.
    """
    curve = CurveServer()
    if not config.security.enabled:
        return curve
    keys = key_directory(config)
    _fill_server(curve, keys, "kvstore", DOMAIN_KVSTORE, CLIENT_ROLES + (("kvstore",) if pair else ()))
    return curve


def kvstore_client_curve(config: Config, role: str, key_dir: str | Path | None = None,
                         key_name: str = "") -> CurveClient:
    """A kvstore client of a process of ``role``: its pair (``<role>/<key_name>`` if named), the
    server's public key."""
    curve = CurveClient()
    if not config.security.enabled:
        return curve
    keys = key_directory(config, key_dir)
    _fill_client(curve, keys, own_role(keys, role), "kvstore", own_name=key_name)
    return curve


def aggregator_key_name(config: Config, member: int) -> str:
    """The name of tier member ``member``'s pair (``aggregator/member-<i>``), "" without a tier."""
    names = _tier_names(config)
    return names[member] if names else ""


def _tier_names(config: Config) -> list[str]:
    """Each member's certificate name with a tier of more than one, else [] (the folder's one pair)."""
    members = len(config.aggregator.hosts)
    return [tier_member_key_name(member) for member in range(members)] if members > 1 else []


def aggregator_curves(config: Config, member: int = 0) -> tuple[CurveServer, CurveServer]:
    """The aggregator's producer ports and its connections to NodeGroups (both CURVE servers): the
    pair of tier member ``member`` (``aggregator/member-<i>``) with a tier, else the folder's one."""
    producers, nodegroups = CurveServer(), CurveServer()
    if config.security.enabled:
        keys = key_directory(config)
        name = aggregator_key_name(config, member)
        if not config.security.plain_receivers:
            _fill_server(producers, keys, "aggregator", DOMAIN_PRODUCERS, ("producer",), name)
        _fill_server(nodegroups, keys, "aggregator", DOMAIN_NODEGROUPS, ("nodegroup",), name)
    return producers, nodegroups


def data_client_curve(config: Config, role: str, key_dir: str | Path | None = None) -> CurveClient:
    """A producer's or a NodeGroup's data sockets: its pair, the aggregator's public key (member 0's
    with a tier: ``aggregator_keys`` gives each member's)."""
    curve = CurveClient()
    if config.security.enabled and not (role == "producer" and config.security.plain_receivers):
        names = _tier_names(config)
        _fill_client(curve, key_directory(config, key_dir), role, "aggregator", names[0] if names else "")
    return curve


def aggregator_keys(config: Config, role: str, key_dir: str | Path | None = None) -> list[str]:
    """Each tier member's public key, member order, for a producer's or a NodeGroup's data sockets
    (each speaks to one member): [] without a tier or without CURVE on that hop."""
    if not config.security.enabled or (role == "producer" and config.security.plain_receivers):
        return []
    keys = key_directory(config, key_dir)
    return [keys.public_key("aggregator", name) for name in _tier_names(config)]


def live_curve(config: Config, key_dir: str | Path | None = None) -> CurveServer:
    """A NodeGroup's live sockets: its own nodegroup pair, the viewers' and operators' public keys."""
    curve = CurveServer()
    if config.security.enabled:
        _fill_server(curve, key_directory(config, key_dir), "nodegroup", DOMAIN_LIVE, LIVE_ROLES)
    return curve


def live_client_curve(config: Config, server_key: str, role: str = "viewer") -> CurveClient:
    """A live subscriber: this host's viewer pair (or its operator's), the NodeGroup's advertised key.

    Raises:
        SecurityError: no viewer or operator secret here, or a server key that is not Z85.
    """
    curve = CurveClient()
    if not config.security.enabled:
        return curve
    keys = key_directory(config)
    own = keys.own(own_role(keys, role))
    curve.public_key, curve.secret_key = own.public_key, own.secret_key
    curve.server_key = server_key
    return curve


def _fill_server(curve: CurveServer, keys: KeyDirectory, role: str, domain: str, accepted: tuple[str, ...],
                 name: str = "") -> None:
    own = keys.own(role, name)
    curve.public_key, curve.secret_key = own.public_key, own.secret_key
    curve.domain = domain
    curve.peers = keys.allowlist(list(accepted))
    if not curve.peers:
        logger.warning("%s: no public certificate of %s (<role>/*.key): the %s sockets admit nobody; copy the "
                       "parties' .key files there", keys.path, " or ".join(accepted), domain)


def _fill_client(curve: CurveClient, keys: KeyDirectory, role: str, server_role: str, server_name: str = "",
                 own_name: str = "") -> None:
    own = keys.own(role, own_name)
    curve.public_key, curve.secret_key = own.public_key, own.secret_key
    curve.server_key = keys.public_key(server_role, server_name)
