"""A local stack's run directory: where it is unless ``--run-dir`` says, and whether the
configuration file of the stack running there changed since ``sectorflow up`` started it.

``up`` (orchestration/cli.py) keeps its services' logs and the services file there; ``status`` and
``down`` find it again by :func:`default_run_dir`.

Every service reads its configuration once, at start (docs/configuration.md): an edit of the file
while the stack runs changes nothing until the services start again. ``up`` keeps the file as it
was in the run directory (:data:`SNAPSHOT`); :func:`restart_note` compares the file now with it,
key by key after loading both (a comment or the order of keys is no change), and says which keys
changed and that a restart applies them. ``sectorflow status`` and a second ``up`` print it.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from sectorflow.configs import Config, ConfigError, config_from_dict

SNAPSHOT = "config-at-start.toml"


def default_run_dir(config: Config) -> Path:
    """Where ``up`` runs ``config``'s stack without ``--run-dir``: runs/<configuration file's stem>."""
    return Path("runs") / Path(config.source).stem


def keep_snapshot(config: Config, run_dir: Path) -> None:
    """Keep the configuration file as the stack starts with it (nothing for one from no file)."""
    source = Path(config.source)
    if config.source.startswith("<") or not source.is_file():
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / SNAPSHOT).write_text(source.read_text())


def forget_snapshot(run_dir: Path) -> None:
    """The stack stopped: nothing runs with the kept file any more."""
    (run_dir / SNAPSHOT).unlink(missing_ok=True)


def changed_keys(config: Config, run_dir: Path) -> list[str]:
    """The keys (``table.key``; ``receivers`` as a whole) whose value in ``config`` differs from the
    snapshot in ``run_dir``; none without a snapshot or with one that no longer loads."""
    path = run_dir / SNAPSHOT
    if not path.is_file():
        return []
    try:
        started = config_from_dict(tomllib.loads(path.read_text()), source=str(path))
    except (ConfigError, tomllib.TOMLDecodeError):
        return []
    now, then = _flat(dataclasses.asdict(config)), _flat(dataclasses.asdict(started))
    now.pop("source", None)
    then.pop("source", None)
    return sorted(key for key in now.keys() | then.keys() if now.get(key) != then.get(key))


def restart_note(config: Config, run_dir: Path) -> str | None:
    """One line naming what changed in ``config``'s file since the stack in ``run_dir`` started, and
    that a restart applies it; None when nothing changed."""
    keys = changed_keys(config, run_dir)
    if not keys:
        return None
    shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    options = f"--config {Path(config.source).resolve()} --run-dir {run_dir}"
    return (f"{config.source} changed since the stack started ({shown}): restart to apply "
            f"('sectorflow down {options}', then 'sectorflow up {options}')")


def _flat(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


__all__ = ["SNAPSHOT", "changed_keys", "default_run_dir", "forget_snapshot", "keep_snapshot", "restart_note"]
