"""requirements.lock is the one list of Python versions: everything pyproject.toml names is in it,
at a version pyproject's range allows, with hashes (`make lock` writes it again)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def locked() -> dict[str, tuple[Version, int]]:
    """Each locked package's version and its number of hashes."""
    pins: dict[str, tuple[Version, int]] = {}
    name = None
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        pin = PIN.match(line)
        if pin:
            name = canonicalize_name(pin.group(1))
            pins[name] = (Version(pin.group(2)), 0)
        elif name is not None and line.strip().startswith("--hash=sha256:"):
            version, hashes = pins[name]
            pins[name] = (version, hashes + 1)
    return pins


def named_in_pyproject() -> list[Requirement]:
    """Every requirement of pyproject.toml: dependencies, extras, build requirements, groups."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    texts = list(project["project"]["dependencies"])
    for extra in project["project"]["optional-dependencies"].values():
        texts += extra
    texts += project["build-system"]["requires"]
    for group in project.get("dependency-groups", {}).values():
        texts += group
    own = canonicalize_name(project["project"]["name"])
    return [r for r in map(Requirement, texts) if canonicalize_name(r.name) != own]


def test_every_requirement_of_pyproject_is_locked_at_a_version_its_range_allows() -> None:
    pins = locked()
    for requirement in named_in_pyproject():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is in pyproject.toml but not in requirements.lock: run make lock"
        version = pins[name][0]
        assert requirement.specifier.contains(version, prereleases=True), \
            f"requirements.lock has {name}=={version}, outside pyproject.toml's {requirement}: run make lock"


def test_every_locked_package_has_its_hashes() -> None:
    pins = locked()
    assert "mpi4py" in pins and "pip" in pins
    assert not [name for name, (_, hashes) in pins.items() if hashes == 0]
