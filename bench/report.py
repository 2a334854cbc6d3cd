"""How results are written down: Markdown tables, the dated BENCHMARKS.md section of a run, and the
targets table at the top of BENCHMARKS.md (kept between markers, one row per target, each row from
the latest run of its benchmark). Pure text in, text out.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from bench import BenchmarkResult, Target

TARGETS_BEGIN = "<!-- targets:begin (rewritten by python -m bench: one row per target, from its latest run) -->"
TARGETS_END = "<!-- targets:end -->"
TARGET_COLUMNS = ["benchmark", "target", "goal", "measured", "met", "run"]


def cell(value: Any) -> str:
    """One table cell: thousands separators and one decimal from 100 up, two decimals below."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(columns: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table with padded columns (also readable on a terminal)."""
    cells = [[str(c) for c in columns]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def machine_line(host: dict[str, Any]) -> str:
    """Cores, CPU, memory, load and Python of the machine that ran a benchmark."""
    return (f"{host.get('cores')} cores ({host.get('cpu', 'unknown CPU')}), {host.get('memory_gib', '?')} GiB memory, "
            f"load average {host.get('load_average_1min', 0):.2f} at start, Python {host.get('python')}")


def section(name: str, result: BenchmarkResult, command: str, host: dict[str, Any], started: dt.datetime,
            seconds: float, json_path: str, png_path: str) -> str:
    """The dated BENCHMARKS.md section of one benchmark's run."""
    lines = [
        f"## {started.strftime('%Y-%m-%d %H:%M')} UTC: {name}",
        "",
        f"Command: `{command}` ({seconds:.0f} s for this benchmark)  ",
        f"Machine: {machine_line(host)}  ",
        f"Raw figures: `{json_path}`, plot: `{png_path}` (on the machine that ran it; bench/results/ is not committed)",
        "",
        table(result.columns, result.rows),
        "",
    ]
    for extra in result.tables:
        lines += [f"{extra.title}:", "", table(extra.columns, extra.rows), ""]
    lines += [f"- {note}" for note in result.notes]
    if result.targets:
        lines += [f"- target: {t.name}: {t.goal}, measured {t.measured}: {'met' if t.met else 'MISSED'}"
                  for t in result.targets]
    return "\n".join(lines) + "\n"


def target_rows(name: str, targets: list[Target], started: dt.datetime) -> list[list[str]]:
    """The targets table rows of one benchmark's run."""
    when = started.strftime("%Y-%m-%d %H:%M UTC")
    return [[name, t.name, t.goal, t.measured, "yes" if t.met else "**no**", when] for t in targets]


def _parse_rows(block: str) -> list[list[str]]:
    rows = []
    for line in block.splitlines():
        line = line.strip()
        if not line.startswith("|") or set(line) <= {"|", "-", " "}:
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells != TARGET_COLUMNS and len(cells) == len(TARGET_COLUMNS):
            rows.append(cells)
    return rows


def merge_targets(ledger: str, name: str, rows: list[list[str]], order: list[str]) -> str:
    """``ledger`` with the targets table's rows of benchmark ``name`` replaced by ``rows``.

    Rows of other benchmarks stay; rows are ordered by ``order`` (benchmark names), then as they
    came. Without the markers, a "## Targets" section is inserted before the first dated section
    (or at the end).
    """
    if TARGETS_BEGIN in ledger and TARGETS_END in ledger:
        head, rest = ledger.split(TARGETS_BEGIN, 1)
        block, tail = rest.split(TARGETS_END, 1)
        kept = [row for row in _parse_rows(block) if row[0] != name]
    else:
        marker = "\n## 2"  # the first dated section, "## 2026-..."
        at = ledger.find(marker)
        head = (ledger if at < 0 else ledger[:at + 1]) + "\n## Targets\n\n"
        tail = "\n" + ("" if at < 0 else ledger[at:])
        kept = []
    rank = {benchmark: i for i, benchmark in enumerate(order)}
    merged = sorted(kept + rows, key=lambda row: rank.get(row[0], len(order)))
    return head + TARGETS_BEGIN + "\n" + table(TARGET_COLUMNS, merged) + "\n" + TARGETS_END + tail
