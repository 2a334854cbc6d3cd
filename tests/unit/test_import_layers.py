"""The layering of sectorflow's Python packages: no import cycle between its top-level packages
(``sectorflow.<x>``, each the folder pyproject.toml maps it from), and the command-side packages
imported only from above (docs/architecture.md, "Layers").

Every ``import`` and ``from ... import`` of a package's modules counts, a lazy one inside a function
included: a cycle there is still two packages that each need the other. The package root
(``sectorflow/``: the command, errors, logging, waits) is not one of the packages: every package
imports it, and its command line imports each subcommand's module by name, at run time.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Edges of the package graph known to close a cycle, left out of the check, each with why.
KNOWN_CYCLE_EDGES = {
    # configs <-> protocol: Config.geometry() builds the C++ protocol's Geometry (an import inside the
    # method), while protocol/scan_instrument.py takes the [instrument] fields from configs' schema.
    # Breaking it moves geometry() off Config, which every component calls: not a small change.
    ("configs", "protocol"): "Config.geometry() returns sectorflow.protocol.Geometry",
}

#: Packages no other package may import: the operator's commands sit on top of everything else.
#: orchestration (up, down, demo) may use operations; operations and the dashboard never import
#: orchestration; only orchestration and the dashboard import operations.
IMPORTED_ONLY_BY = {
    "orchestration": set(),
    "dashboard": set(),
    "operations": {"orchestration", "dashboard"},
}


def package_folders() -> dict[str, Path]:
    """Each component package's name (``x`` of ``sectorflow.x``) and folder, from pyproject.toml.

    A folder that holds components rather than being one (``consumer/``: its ``__init__.py`` is its
    only module, its subpackages the components) gives each subpackage as ``folder.sub``, so that the
    service and the library it holds are weighed apart."""
    with (REPO / "pyproject.toml").open("rb") as file:
        mapping = tomllib.load(file)["tool"]["scikit-build"]["wheel"]["packages"]
    folders: dict[str, Path] = {}
    for target, folder in mapping.items():
        if target.count("/") != 1:
            continue
        name, path = target.split("/")[1], REPO / folder
        modules = [p.name for p in path.glob("*.py")]
        subpackages = sorted(p.parent for p in path.glob("*/__init__.py"))
        if modules == ["__init__.py"] and subpackages:
            folders.update({f"{name}.{sub.name}": sub for sub in subpackages})
        else:
            folders[name] = path
    return folders


def imported_modules(path: Path, module: str, is_package: bool) -> list[tuple[str, int]]:
    """Every module ``path`` (the module ``module``) imports, absolute, with its line."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # ``from sectorflow import live`` imports the package sectorflow.live.
            found += [(base, node.lineno)] + [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return found


def component_of(module: str, folders: dict[str, Path]) -> str | None:
    """The component package ``module`` (``sectorflow.x.y...``) belongs to, or None."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "sectorflow":
        return None
    if len(parts) >= 3 and f"{parts[1]}.{parts[2]}" in folders:
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if parts[1] in folders else None


def package_graph() -> dict[str, dict[str, list[str]]]:
    """package -> packages it imports -> where (``file:line``)."""
    folders = package_folders()
    graph: dict[str, dict[str, list[str]]] = {name: defaultdict(list) for name in folders}
    for name, folder in folders.items():
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(folder).with_suffix("").parts
            is_package = relative[-1] == "__init__"
            module = ".".join(("sectorflow", name) + (relative[:-1] if is_package else relative))
            for target, line in imported_modules(path, module, is_package):
                where = f"{path.relative_to(REPO)}:{line}"
                other = component_of(target, folders)
                if other is not None and other != name and where not in graph[name][other]:
                    graph[name][other].append(where)
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle of ``graph`` as [a, b, ..., a], or None when it has none (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def describe(cycle: list[str], graph: dict[str, dict[str, list[str]]]) -> str:
    return "\n".join([" -> ".join(cycle)] + [f"  {a} -> {b}: {', '.join(graph[a][b])}"
                                              for a, b in zip(cycle, cycle[1:])])


def test_the_graph_is_read_from_every_package() -> None:
    graph = package_graph()
    assert {"configs", "protocol", "operations", "orchestration", "consumer.nodegroup", "consumer.counting",
            "analysis"} <= graph.keys()
    assert "operations" in graph["orchestration"]  # the demo acquires its scan as `acquire` does
    assert "protocol" in graph["configs"]  # the known exception is still there to be excused


def test_no_cycle_between_top_level_packages() -> None:
    graph = package_graph()
    for a, b in KNOWN_CYCLE_EDGES:
        graph[a].pop(b, None)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between sectorflow's packages:\n" + describe(cycle, graph)


def test_the_command_side_is_imported_only_from_above() -> None:
    graph = package_graph()
    wrong = [f"{importer} imports {package}: {', '.join(graph[importer][package])}"
             for package, allowed in IMPORTED_ONLY_BY.items()
             for importer in sorted(graph) if package in graph[importer] and importer not in allowed]
    assert not wrong, "\n".join(wrong)


def test_a_cycle_is_found_and_named() -> None:
    graph = {"a": {"b": ["a.py:1"]}, "b": {"c": ["b.py:2"]}, "c": {"a": ["c.py:3"]}, "d": {"a": ["d.py:4"]}}
    cycle = find_cycle(graph)
    assert cycle == ["a", "b", "c", "a"]
    assert describe(cycle, graph) == "a -> b -> c -> a\n  a -> b: a.py:1\n  b -> c: b.py:2\n  c -> a: c.py:3"
    assert find_cycle({"a": {"b": []}, "b": {}}) is None
