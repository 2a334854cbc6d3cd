"""Render a configuration as TOML: ``configs/defaults.toml``, the default of every key, and a
loaded ``Config`` as the C++ mappings read it (``beamline_of``).

Run ``python -m sectorflow.configs.defaults > configs/defaults.toml``; a test checks the file
matches. The schema stays the one source: Python takes its defaults from the dataclasses, the C++
``sectorflow::configs`` library from this file (compiled in), so both fill a key a beamline file
leaves out with the same value.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
import typing
from typing import Any

from .reference import meaning
from .schema import Config, DetectorConfig, ReceiverConfig

HEADER = """\
# The default of every configuration key, generated from configs/schema.py by
# `python -m sectorflow.configs.defaults > configs/defaults.toml` (a test checks they match).
# A key a beamline file leaves out takes its value from here: in Python through the schema, in
# C++ through the sectorflow::configs library, which compiles this file in (and installs it as
# share/sectorflow/defaults.toml). It is itself a complete configuration: one [[receivers]] per
# sector of the default detector, each with the defaults of a receiver.
# Reference for every key: docs/configuration.md.
"""


def defaults_toml() -> str:
    """Every table of the schema with each key at its default, a comment per key saying what it is;
    one [[receivers]] per sector of the default detector."""
    defaults = Config(receivers=tuple(ReceiverConfig() for _ in range(DetectorConfig().n_sectors)))
    return HEADER + "\n" + config_toml(defaults, documented=True)


def config_toml(config: Config, documented: bool = False) -> str:
    """Every table of ``config`` with each key at its value (``source`` aside), with a comment per
    key if ``documented`` (on the first [[receivers]] only)."""
    parts = []
    hints = typing.get_type_hints(Config)
    for f in dataclasses.fields(Config):
        if f.name == "source":
            continue
        if f.name == "receivers":
            for r, receiver in enumerate(config.receivers):
                parts.append(_table(f"[[{f.name}]]", ReceiverConfig, documented=documented and r == 0, values=receiver))
        else:
            parts.append(_table(f"[{f.name}]", hints[f.name], documented, values=getattr(config, f.name)))
    return "\n".join(parts)


def _table(header: str, table: type, documented: bool = True, values: Any = None) -> str:
    """A table's keys at their defaults (or at ``values``' fields), then its arrays of tables (every
    entry with every key: the C++ loader checks a file's entries against the first)."""
    lines = [header]
    entries = []
    for f in dataclasses.fields(table):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if values is not None:
            default = getattr(values, f.name)
        if "entry" in f.metadata:
            entries.append((f, default))
            continue
        if documented:
            lines.extend(textwrap.wrap(meaning(f), 98, initial_indent="# ", subsequent_indent="# "))
        lines.append(f"{f.name} = {_toml_value(default)}")
    text = "\n".join(lines) + "\n"
    for f, default in entries:
        path = f"{header.strip('[]')}.{f.name}"
        comment = "\n".join(textwrap.wrap(meaning(f), 98, initial_indent="# ", subsequent_indent="# "))
        text += f"{comment}\n" + "\n".join(
            _table(f"[[{path}]]", f.metadata["entry"], documented=i == 0, values=entry)
            for i, entry in enumerate(default))
    return text


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)  # a float keeps its point or exponent: C++ reads it as a float
    if isinstance(value, str):
        # JSON's escapes are TOML basic-string escapes; characters beyond ASCII stay as they are (JSON
        # would write those beyond the BMP as surrogate pairs, which TOML refuses), DEL is escaped.
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for a default of type {type(value).__name__}")


if __name__ == "__main__":
    print(defaults_toml(), end="")
