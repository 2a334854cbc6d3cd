"""TOML files for the services under test or benchmark, which read their configuration from a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w


def write_toml(data: dict[str, Any], path: Path) -> Path:
    """Write ``data`` (tables, arrays, strings, numbers, booleans) to ``path`` as TOML; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps(data))
    return path


def deep_update(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Merge ``overrides`` into ``base`` table by table (a configuration's changes); returns ``base``."""
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = value
    return base
