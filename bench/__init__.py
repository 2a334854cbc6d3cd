"""sectorflow's benchmarks: ``python -m bench [--only NAME]`` runs them, prints a table, writes
JSON and a PNG plot to bench/results/, appends a dated section to BENCHMARKS.md and updates the
targets table at its top.

A benchmark is a module listed in :data:`BENCHMARKS` exposing ``DESCRIPTION`` (one line),
``run(config, options) -> BenchmarkResult`` and ``plot(result, path)`` (writes the PNG). Speed
lives here, never in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Registered benchmarks: name -> module, in the order ``python -m bench`` runs them.
BENCHMARKS: dict[str, str] = {
    "transport": "bench.transport",
    "counting": "bench.counting",
    "pipeline": "bench.pipeline",
    "scaling": "bench.scaling",
    "memory": "bench.memory",
    "counted_write": "bench.counted_write",
    "kvstore_flood": "bench.kvstore_flood",
    "aggregator_failover": "bench.aggregator_failover",
    "kvstore_failover": "bench.kvstore_failover",
    "virtual_images": "bench.virtual_images",
    "wan": "bench.wan",
    "tier": "bench.tier",
    "dashboard": "bench.dashboard",
    "libertem_bridge": "bench.libertem_bridge",
    "libertem_attached": "bench.libertem_attached",
    "pvapy": "bench.pvapy",
    "time_to_science": "bench.time_to_science",  # last: its raw files leave the page cache busy
}


@dataclass(frozen=True)
class RunOptions:
    """What the command line tells every benchmark."""

    quick: bool = False  # leave out the measurements that take minutes (see each benchmark's FULL_* settings)


@dataclass(frozen=True)
class Target:
    """A goal of the benchmarks (BENCHMARKS.md, "Targets") and whether this run met it."""

    name: str  # what is measured, e.g. "(c)/(a) transport ratio"
    goal: str  # e.g. ">= 0.45"
    measured: str  # the figure of this run, formatted
    met: bool


@dataclass(frozen=True)
class Table:
    """A further table of a result, below the main one, under its title."""

    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class BenchmarkResult:
    """What one benchmark measured: a table (column names, rows) plus free-form notes."""

    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


__all__ = ["BENCHMARKS", "BenchmarkResult", "RunOptions", "Table", "Target"]
