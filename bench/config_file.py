"""A benchmark's variant of the configuration, as a TOML file the services load.

The services of a stack read their configuration from a file (``--config``), so a variant made
with ``dataclasses.replace`` (other ports, NodeGroups, producer threads, high-water marks) is
written out with :func:`to_toml` and loaded back with the ordinary loader, which validates it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from sectorflow.configs import Config, load_config

from sectorflow.waiting import free_port_block


def toml_value(value: Any) -> str:
    """One TOML value: a string, boolean, integer, float or table of strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string with its escapes is a TOML basic string
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {value!r} ({type(value).__name__})")


def _table(header: str, section: Any) -> list[str]:
    lines = [header]
    for f in dataclasses.fields(section):
        lines.append(f"{f.name} = {toml_value(getattr(section, f.name))}")
    return lines + [""]


def to_toml(config: Config) -> str:
    """The TOML text of ``config``, every key written out (``source`` is set by the loader, not a key)."""
    lines: list[str] = []
    for f in dataclasses.fields(config):
        if f.name == "source":
            continue
        value = getattr(config, f.name)
        if f.name == "receivers":
            for receiver in value:
                lines += _table("[[receivers]]", receiver)
        else:
            lines += _table(f"[{f.name}]", value)
    return "\n".join(lines)


def write_config(config: Config, path: Path) -> Config:
    """Write ``config`` to ``path`` and load it back (validated; ``source`` is ``path``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_toml(config))
    return load_config(path)


def with_free_ports(config: Config) -> Config:
    """``config`` with its kvstore and aggregator on ports free now (one block, so they cannot overlap)."""
    kv_port = free_port_block(config.kvstore.bind_host, 3 + config.n_receivers)
    base_port = kv_port + 3
    return dataclasses.replace(
        config,
        kvstore=dataclasses.replace(config.kvstore, port=kv_port),
        aggregator=dataclasses.replace(config.aggregator, base_port=base_port),
    )
