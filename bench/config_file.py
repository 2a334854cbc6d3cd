"""A benchmark's variant of the configuration, as a TOML file the services load.

The services of a stack read their configuration from a file (``--config``), so a variant made
with ``dataclasses.replace`` (other ports, NodeGroups, producer threads, high-water marks) is
written out as the tables of :func:`config_tables` and loaded back with the ordinary loader, which
validates it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness import free_port_block, write_toml
from sectorflow.configs import Config, load_config


def config_tables(config: Config) -> dict[str, Any]:
    """The TOML tables of ``config``, every key written out (``source`` is set by the loader, not a key)."""
    return {name: value for name, value in dataclasses.asdict(config).items() if name != "source"}


def write_config(config: Config, path: Path) -> Config:
    """Write ``config`` to ``path`` and load it back (validated; ``source`` is ``path``)."""
    return load_config(write_toml(config_tables(config), path))


def with_free_ports(config: Config) -> Config:
    """``config`` with its kvstore and aggregator on ports free now (one block, so they cannot overlap)."""
    kv_port = free_port_block(config.kvstore.bind_host, 3 + config.n_receivers)
    base_port = kv_port + 3
    return dataclasses.replace(
        config,
        kvstore=dataclasses.replace(config.kvstore, port=kv_port),
        aggregator=dataclasses.replace(config.aggregator, base_port=base_port),
    )
