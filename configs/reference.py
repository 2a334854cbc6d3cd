"""Render the configuration reference (docs/configuration.md) from the schema.

Run ``python -m sectorflow.configs.reference`` to print it; a test checks docs/configuration.md matches.
"""

from __future__ import annotations

import dataclasses
import typing

from .schema import Config, ReceiverConfig


def reference_markdown() -> str:
    """One table row per key: key, default, meaning (with its allowed range or choices)."""
    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    hints = typing.get_type_hints(Config)
    for f in dataclasses.fields(Config):
        if f.name == "source":
            continue
        table = ReceiverConfig if f.name == "receivers" else hints[f.name]
        prefix = "[[receivers]]" if f.name == "receivers" else f"[{f.name}]"
        for sub in dataclasses.fields(table):
            default = sub.default if sub.default is not dataclasses.MISSING else sub.default_factory()
            if "entry" in sub.metadata:
                shown = ", ".join(f"{entry.name} ({entry.kind})" for entry in default)
                rows.append(f"| `{prefix} {sub.name}` | {shown} | {meaning(sub)} |")
                entry_prefix = f"[[{f.name}.{sub.name}]]"
                for key in dataclasses.fields(sub.metadata["entry"]):
                    rows.append(f"| `{entry_prefix} {key.name}` | `{key.default!r}` | {meaning(key)} |")
                continue
            shown = list(default) if isinstance(default, tuple) else default  # as a TOML array
            rows.append(f"| `{prefix} {sub.name}` | `{shown!r}` | {meaning(sub)} |")
    return "\n".join(rows)


def meaning(f: dataclasses.Field) -> str:
    """A key's doc with its allowed range or choices (the reference's and defaults.toml's comments)."""
    rules = f.metadata
    text = rules.get("doc", "")
    if "choices" in rules:
        text += f" (one of {', '.join(map(str, rules['choices']))})"
    elif "min" in rules or "max" in rules:
        low, high = rules.get("min"), rules.get("max")
        text += f" ({low} to {high})" if high is not None else f" (at least {low})"
    return text


if __name__ == "__main__":
    print(reference_markdown())
