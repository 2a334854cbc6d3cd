"""sectorflow's benchmarks: ``python -m bench [--only NAME]`` runs them, prints a table, writes
JSON to bench/results/ and appends a dated section to BENCHMARKS.md.

A benchmark is a module listed in :data:`BENCHMARKS` exposing ``DESCRIPTION`` (one line) and
``run(config) -> BenchmarkResult``. Speed lives here, never in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Registered benchmarks: name -> module.
BENCHMARKS: dict[str, str] = {
    "counting": "bench.counting",
    "transport": "bench.transport",
}


@dataclass
class BenchmarkResult:
    """What one benchmark measured: a table (column names, rows) plus free-form notes."""

    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


__all__ = ["BENCHMARKS", "BenchmarkResult"]
