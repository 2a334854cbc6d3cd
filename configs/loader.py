"""Load and validate a configuration file once, at start-up, into a frozen ``Config``.

Every mistake is one ``ConfigError`` line naming the file, the key, the value and what was
expected, with a "did you mean" for unknown keys.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
import typing
from pathlib import Path
from typing import Any

from sectorflow.errors import SectorflowError, SectorflowValueError

from .schema import (
    DETECTOR_KEYS,
    IMAGE_NAME,
    RESERVED_IMAGE_NAMES,
    Config,
    ReceiverConfig,
    VirtualDetectorConfig,
    min_takeover_s,
)

CONFIG_DIR = Path(__file__).resolve().parent
DEFAULT_CONFIG = CONFIG_DIR / "local.toml"
# Every key at its default, generated from the schema (defaults.py): what C++ reads, not a beamline.
DEFAULTS_TABLE = CONFIG_DIR / "defaults.toml"
# Set by the loader, never by a file.
_INTERNAL_KEYS = {"source"}
# Keys a file may still hold from an older release, and what replaced them.
_RETIRED = {
    f"analysis.{key}": "the virtual detectors are [[analysis.virtual_detectors]] tables now (docs/configuration.md): "
    "a disk named bright_field with radius, an annulus named dark_field with inner and outer"
    for key in ("bright_field_radius_px", "dark_field_inner_px", "dark_field_outer_px")
}


class ConfigError(SectorflowValueError):
    """A configuration file that cannot be used; the message says where and why."""


def load_config(path: str | Path | None = None) -> Config:
    """Load ``path`` (default: the embedded ``configs/local.toml``) and validate it.

    Raises ConfigError for a missing or unreadable file, bad TOML, an unknown key, a wrong type,
    a value out of range, or a geometry whose sectors do not tile the frame.
    """
    file = Path(path) if path is not None else DEFAULT_CONFIG
    try:
        text = file.read_text()
    except FileNotFoundError:
        shipped = ", ".join(sorted(p.name for p in CONFIG_DIR.glob("*.toml") if p != DEFAULTS_TABLE))
        raise ConfigError(f"{file}: no such configuration file (shipped ones: {shipped})") from None
    except OSError as error:
        raise ConfigError(f"{file}: cannot read: {error.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{file}: not valid TOML: {error}") from None
    return config_from_dict(data, source=str(file))


def config_from_dict(data: dict[str, Any], source: str = "<dict>") -> Config:
    """Validate an already parsed TOML document; ``source`` names it in error messages."""
    values = _build(Config, data, source, prefix="")
    config = dataclasses.replace(values, source=source)
    _check_whole(config, source)
    return config


def _build(cls: type, data: Any, source: str, prefix: str) -> Any:
    table = f"[{prefix}]" if prefix else "the top level"
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {table}: expected a table, got {_type_name(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in _INTERNAL_KEYS}
    for key in data:
        if key not in fields:
            if (dotted := _dotted(prefix, key)) in _RETIRED:
                raise ConfigError(f"{source}: '{dotted}' is no longer a key: {_RETIRED[dotted]}")
            hint = difflib.get_close_matches(key, fields, n=1)
            suggestion = f"; did you mean '{hint[0]}'?" if hint else f"; known keys: {', '.join(fields)}"
            raise ConfigError(f"{source}: unknown key '{_dotted(prefix, key)}'{suggestion}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{source}: missing key '{_dotted(prefix, name)}' ({f.metadata.get('doc', '')})")
            continue
        kwargs[name] = _value(hints[name], f, data[name], source, _dotted(prefix, name))
    return cls(**kwargs)


def _value(hint: Any, f: dataclasses.Field, value: Any, source: str, key: str) -> Any:
    rules = f.metadata
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, source, key)
    if key == "receivers":
        if not isinstance(value, list) or not value:
            raise ConfigError(f"{source}: '{key}' must be a non-empty array of tables ([[receivers]]), one per sector")
        return tuple(_build(ReceiverConfig, item, source, f"{key}[{i}]") for i, item in enumerate(value))
    if "entry" in rules:
        return _entries(rules, value, source, key)
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigError(f"{source}: '{key}' = {value!r}: expected an array of strings ({rules.get('doc', '')})")
        return tuple(value)
    expected = {int: "an integer", float: "a number", str: "a string", bool: "true or false", dict: "a table"}[hint]
    ok = (
        isinstance(value, hint) and not (hint is int and isinstance(value, bool))
        if hint is not float
        else isinstance(value, (int, float)) and not isinstance(value, bool)
    )
    if not ok:
        raise ConfigError(f"{source}: '{key}' = {value!r}: expected {expected} ({rules.get('doc', '')})")
    if hint is float:
        value = float(value)
    low, high = rules.get("min"), rules.get("max")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ConfigError(f"{source}: '{key}' = {value!r}: expected a value {bounds} ({rules.get('doc', '')})")
    choices = rules.get("choices")
    if choices and value not in choices:
        raise ConfigError(f"{source}: '{key}' = {value!r}: expected one of {', '.join(map(repr, choices))}")
    if hint is dict:
        for name, item in value.items():
            if not isinstance(item, str):
                raise ConfigError(f"{source}: '{key}.{name}' = {item!r}: expected a string")
    return value


def _entries(rules: dict[str, Any], value: Any, source: str, key: str) -> tuple:
    """An array of tables ([[key]]) of ``rules["entry"]``, at most ``rules["max_entries"]``."""
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ConfigError(f"{source}: '{key}' must be an array of tables ([[{key}]]), got {_type_name(value)}")
    most = rules["max_entries"]
    if len(value) > most:
        raise ConfigError(f"{source}: '{key}' lists {len(value)} tables, at most {most} are allowed")
    entries = tuple(_build(rules["entry"], item, source, f"{key}[{i}]") for i, item in enumerate(value))
    if rules["entry"] is VirtualDetectorConfig:
        _check_detectors(entries, value, source, key)
    return entries


def _check_detectors(detectors: tuple, given: list[dict[str, Any]], source: str, key: str) -> None:
    """Names usable as image names and unique; each kind's keys, and only those, with a sensible shape."""
    seen: set[str] = set()
    for i, (d, raw) in enumerate(zip(detectors, given)):
        where = f"{source}: '{key}[{i}]'"
        if "name" not in raw:
            raise ConfigError(f"{where} has no name: each virtual detector needs one (the name of its image)")
        if not IMAGE_NAME.fullmatch(d.name) or d.name in RESERVED_IMAGE_NAMES:
            raise ConfigError(f"{where}: name = {d.name!r}: expected letters, digits and _ (not first a digit), at "
                              f"most 32, and not one of {', '.join(RESERVED_IMAGE_NAMES)}")
        if d.name in seen:
            raise ConfigError(f"{where}: name = {d.name!r} is already the name of another virtual detector")
        seen.add(d.name)
        if "kind" not in raw:
            raise ConfigError(f"{where} ({d.name}) has no kind: one of {', '.join(map(repr, DETECTOR_KEYS))}")
        allowed = DETECTOR_KEYS[d.kind]
        # Another kind's key at its default is harmless (defaults.toml lists every key of an entry).
        defaults = VirtualDetectorConfig()
        for extra in sorted(raw.keys() - {"name", "kind", *allowed}):
            if getattr(d, extra) == getattr(defaults, extra):
                continue
            raise ConfigError(f"{where} ({d.name}): '{extra}' is not a key of a {d.kind}; a {d.kind} takes "
                              f"{', '.join(allowed)}")
        if d.kind == "disk" and not d.radius > 0:
            raise ConfigError(f"{where} ({d.name}): a disk needs a radius above 0, got radius = {d.radius!r}")
        if d.kind == "annulus" and not d.outer > d.inner:
            raise ConfigError(f"{where} ({d.name}): an annulus needs outer above inner, got inner = {d.inner!r}, "
                              f"outer = {d.outer!r}")
        if d.kind == "mask" and not d.mask:
            raise ConfigError(f"{where} ({d.name}): a mask needs mask = the path of a .npy file of the frame's shape")
        if d.kind == "rectangle" and (d.rows < 1 or d.cols < 1):
            raise ConfigError(f"{where} ({d.name}): a rectangle needs rows and cols of at least 1, got rows = "
                              f"{d.rows}, cols = {d.cols}")


def _check_whole(config: Config, source: str) -> None:
    d = config.detector
    from sectorflow.analysis import plan_of  # the registry: analysis/__init__.py

    try:
        outputs = plan_of(config).outputs()
    except SectorflowError as error:
        raise ConfigError(f"{source}: {error}") from None
    # An output's name is its key in the live stream, the dashboard's images and the metrics, so a
    # virtual detector must not take the name of another analysis's output.
    names = [o.name for o in outputs]
    for name in dict.fromkeys(n for n in names if names.count(n) > 1):
        raise ConfigError(f"{source}: 'analysis.virtual_detectors' names a detector '{name}', which is also an "
                          "output of another analysis (an image's name must be unique): rename the detector")
    for i, v in enumerate(config.analysis.virtual_detectors):
        if v.kind == "rectangle" and (v.row0 + v.rows > d.frame_rows or v.col0 + v.cols > d.frame_cols):
            raise ConfigError(
                f"{source}: 'analysis.virtual_detectors[{i}]' ({v.name}): rows {v.row0} to {v.row0 + v.rows - 1}, "
                f"columns {v.col0} to {v.col0 + v.cols - 1} reach past the {d.frame_rows} x {d.frame_cols} frame"
            )
    if d.frame_rows % d.sector_rows or d.frame_cols % d.sector_cols:
        raise ConfigError(
            f"{source}: [detector] sectors of {d.sector_rows} x {d.sector_cols} do not tile a frame of "
            f"{d.frame_rows} x {d.frame_cols}: frame_rows must be a multiple of sector_rows and "
            "frame_cols of sector_cols"
        )
    if config.n_receivers != d.n_sectors:
        raise ConfigError(
            f"{source}: 'receivers' lists {config.n_receivers} receivers but the detector has "
            f"{d.n_sectors} sectors: receiver r reads sector r, so list one [[receivers]] per sector"
        )
    most_threads = max(r.threads for r in config.receivers)
    if config.producer.max_lead_frames < most_threads:
        raise ConfigError(
            f"{source}: 'producer.max_lead_frames' = {config.producer.max_lead_frames} is less than the "
            f"{most_threads} threads of a receiver: thread t's next frame is {most_threads} past its last, so it "
            f"must be at least {most_threads}"
        )
    if config.nodegroup.file_mode and not re.fullmatch(r"0?[0-7]{3}", config.nodegroup.file_mode):
        raise ConfigError(
            f"{source}: 'nodegroup.file_mode' = {config.nodegroup.file_mode!r}: expected permissions in octal, "
            "such as '0640' (owner reads and writes, group reads), or '' to follow the umask"
        )
    if config.nodegroup.mpiexec_port_min > config.nodegroup.mpiexec_port_max:
        raise ConfigError(
            f"{source}: 'nodegroup.mpiexec_port_min' = {config.nodegroup.mpiexec_port_min} is above "
            f"'nodegroup.mpiexec_port_max' = {config.nodegroup.mpiexec_port_max}: the range is empty"
        )
    if config.kvstore.ttl_s > config.kvstore.max_ttl_s:
        raise ConfigError(
            f"{source}: 'kvstore.ttl_s' = {config.kvstore.ttl_s!r} is above 'kvstore.max_ttl_s' = "
            f"{config.kvstore.max_ttl_s!r}: the server would clamp every registration's ttl; raise max_ttl_s"
        )
    if config.kvstore.scan_record_ttl_s > config.kvstore.max_ttl_s:
        raise ConfigError(
            f"{source}: 'kvstore.scan_record_ttl_s' = {config.kvstore.scan_record_ttl_s!r} is above "
            f"'kvstore.max_ttl_s' = {config.kvstore.max_ttl_s!r}: the server would clamp it; raise max_ttl_s"
        )
    check_kvstore_servers(config.kvstore.servers, source)
    check_takeover(config, source)
    check_binds(config, source)
    check_tier(config, source)


# Aggregators in one tier: protocol::kMaxTier.
_TIER_MAX = 16
# A NodeGroup's data ports, one per relay thread of the tier: protocol::kMaxPorts.
_PORTS_MAX = 256


def check_tier(config: Config, source: str) -> None:
    """``[aggregator] tier``: at most kMaxTier members, their ports below 65536, at most kMaxPorts
    relay threads (a NodeGroup binds a data port for each)."""
    agg = config.aggregator
    members = len(agg.hosts)
    if members > _TIER_MAX:
        raise ConfigError(f"{source}: 'aggregator.tier' lists {members} aggregators, at most {_TIER_MAX}")
    if members * config.n_receivers > _PORTS_MAX:
        raise ConfigError(
            f"{source}: 'aggregator.tier' lists {members} aggregators for {config.n_receivers} receivers: "
            f"{members * config.n_receivers} relay threads, and a NodeGroup binds a data port for each, at most "
            f"{_PORTS_MAX}; list fewer aggregators"
        )
    last = agg.base_port + members * config.n_receivers - 1
    if last > 65535:
        raise ConfigError(
            f"{source}: 'aggregator.base_port' = {agg.base_port}: relay thread ports up to base_port + "
            f"{members * config.n_receivers - 1} = {last} must stay below 65536"
        )


def check_takeover(config: Config, source: str) -> None:
    """``[aggregator] takeover_s`` with a standby: long enough that a kvstore failover never fences the active."""
    kv, agg = config.kvstore, config.aggregator
    if not agg.standby_host:
        return
    least = min_takeover_s(kv.heartbeat_ms, kv.silence_heartbeats)
    if agg.takeover_s < least - 1e-9:
        raise ConfigError(
            f"{source}: 'aggregator.takeover_s' = {agg.takeover_s:g} is too short for a kvstore failover: the active "
            f"aggregator's client needs up to (silence_heartbeats {kv.silence_heartbeats} + 2) heartbeats of "
            f"{kv.heartbeat_ms} ms = {(kv.silence_heartbeats + 2) * kv.heartbeat_ms / 1000:g} s to find the new active "
            f"and would stop relaying meanwhile; set takeover_s to at least {least:g} (or shorten kvstore.heartbeat_ms)"
        )


# A kvstore server uses P, P + 1 and P + 2 (kvstore/SPEC.md, "Roles and sockets").
_KVSTORE_PORT_MAX = 65533
# Binary Star: a primary and a backup.
_KVSTORE_SERVERS_MAX = 2


def check_kvstore_servers(servers: tuple[str, ...], source: str) -> None:
    """``[kvstore] servers``: each "host:port" with a kvstore port, no server twice, at most a pair."""
    if len(servers) > _KVSTORE_SERVERS_MAX:
        raise ConfigError(
            f"{source}: 'kvstore.servers' lists {len(servers)} servers: a kvstore pair (Binary Star) is a primary and "
            f"a backup, so at most {_KVSTORE_SERVERS_MAX}"
        )
    for i, server in enumerate(servers):
        host, colon, port = server.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ConfigError(
                f"{source}: 'kvstore.servers[{i}]' = {server!r}: expected \"host:port\" (a server's address and its "
                "snapshot port P)"
            )
        if not 1 <= int(port) <= _KVSTORE_PORT_MAX:
            raise ConfigError(
                f"{source}: 'kvstore.servers[{i}]' = {server!r}: port {int(port)} out of range: expected 1 to "
                f"{_KVSTORE_PORT_MAX} (the server uses P, P + 1 and P + 2)"
            )
        if server in servers[:i]:
            raise ConfigError(
                f"{source}: 'kvstore.servers[{i}]' = {server!r} is listed twice: the pair is two different servers"
            )


# What a bind may name and stay on this host: loopback addresses.
_LOOPBACK = ("localhost", "::1")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` stays on this machine (127.0.0.0/8, ::1, localhost)."""
    return host in _LOOPBACK or host.startswith("127.")


def check_binds(config: Config, source: str) -> None:
    """Without security, no service may listen beyond loopback unless the file says it knows.

    ``source`` starts the error line: the file, or the command-line option that moved a bind.
    """
    if config.security.enabled or config.security.allow_insecure:
        return
    binds = {"kvstore.bind_host": config.kvstore.bind_host, "aggregator.bind_host": config.aggregator.bind_host,
             "nodegroup.host": config.nodegroup.host, "dashboard.bind_host": config.dashboard.bind_host}
    for key, host in binds.items():
        if not is_loopback(host):
            raise ConfigError(
                f"{source}: '{key}' = {host!r} listens beyond this machine without security: anyone who reaches "
                "it could stream, register or command. Set [security] enabled = true (with keys: 'sectorflow "
                "keys generate'), or allow_insecure = true to accept that on a closed network"
            )


def _dotted(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _type_name(value: Any) -> str:
    return {list: "an array", str: "a string", int: "an integer", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
