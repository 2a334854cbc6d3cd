"""The layout is the architecture: which component may import which (docs/architecture.md).

The operator's room (operations/) serves the command line and the dashboard alike, so the
dashboard and the stack's orchestration need not import each other, and no service depends on
what an operator runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("producer", "aggregator", "nodegroup", "kvstore", "live", "counting", "protocol", "simulator",
            "libertem_bridge")


def imported_components(component: str) -> dict[str, set[str]]:
    """For each module of ``component``: the sectorflow components it imports (absolute imports)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / component).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            names |= {m.split(".")[1] for m in modules if m.startswith("sectorflow.") and m.count(".") >= 1}
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize("component, forbidden", [("dashboard", "orchestration"), ("orchestration", "dashboard")])
def test_the_dashboard_and_the_orchestration_do_not_import_each_other(component: str, forbidden: str) -> None:
    offenders = {module for module, names in imported_components(component).items() if forbidden in names}
    assert not offenders, f"{sorted(offenders)} import sectorflow.{forbidden}"


@pytest.mark.parametrize("component", SERVICES)
def test_no_service_imports_the_operators_room(component: str) -> None:
    offenders = {module for module, names in imported_components(component).items() if "operations" in names}
    assert not offenders, f"{sorted(offenders)} import sectorflow.operations"
