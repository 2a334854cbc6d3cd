"""Run the registered benchmarks: ``python -m bench [--only NAME ...] [--config FILE]``.

Prints each result as a table, writes it as JSON to bench/results/NAME-TIMESTAMP.json and
appends a dated section (command, machine, figures) to BENCHMARKS.md at the repository root.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

from bench import BENCHMARKS, BenchmarkResult

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
LEDGER = REPO / "BENCHMARKS.md"


def machine() -> dict[str, Any]:
    """Cores, memory, CPU model, load and versions: what a figure needs beside it."""
    info: dict[str, Any] = {
        "host": platform.node(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
                break
        info["load_average_1min"] = os.getloadavg()[0]
    except OSError:
        pass
    return info


def table(result: BenchmarkResult) -> str:
    """A Markdown table of the result (also readable on a terminal)."""
    cells = [[str(c) for c in result.columns]] + [[_cell(v) for v in row] for row in result.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(result.columns))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)


def record(name: str, result: BenchmarkResult, command: str, host: dict[str, Any], started: dt.datetime) -> Path:
    """Write the JSON file and append the BENCHMARKS.md section; returns the JSON path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}-{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps({
        "benchmark": name,
        "started": started.isoformat(),
        "command": command,
        "machine": host,
        "columns": result.columns,
        "rows": result.rows,
        "notes": result.notes,
        "details": result.details,
    }, indent=2) + "\n")
    if not LEDGER.exists():
        LEDGER.write_text("# Benchmarks\n\nSections are appended by `python -m bench`; newest last.\n")
    memory = f"{host.get('memory_gib', '?')} GiB"
    section = [
        "",
        f"## {started.strftime('%Y-%m-%d %H:%M')} UTC: {name}",
        "",
        f"Command: `{command}`  ",
        f"Machine: {host.get('cores')} cores ({host.get('cpu', 'unknown CPU')}), {memory} memory, "
        f"load average {host.get('load_average_1min', 0):.2f} at start, Python {host.get('python')}  ",
        f"Raw figures: `{path.relative_to(REPO)}` (on the machine that ran it; bench/results/ is not committed)",
        "",
        table(result),
        "",
    ]
    section += [f"- {note}" for note in result.notes]
    with LEDGER.open("a") as ledger:
        ledger.write("\n".join(section) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run sectorflow's benchmarks, print tables, record JSON and BENCHMARKS.md sections.",
    )
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS), metavar="NAME",
                        help=f"run only this benchmark (repeatable); one of: {', '.join(sorted(BENCHMARKS))}")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="configuration file (TOML); default: the shipped configs/local.toml")
    parser.add_argument("--no-record", action="store_true",
                        help="print only; write neither bench/results/ nor BENCHMARKS.md")
    args = parser.parse_args(argv)

    from sectorflow.configs import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"bench: error: {error}", file=sys.stderr)
        return 2
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    host = machine()
    for name in args.only or sorted(BENCHMARKS):
        module = importlib.import_module(BENCHMARKS[name])
        started = dt.datetime.now(dt.timezone.utc)
        print(f"== {name}: {module.DESCRIPTION}", flush=True)
        result: BenchmarkResult = module.run(config)
        print(table(result))
        for note in result.notes:
            print(f"- {note}")
        if not args.no_record:
            path = record(name, result, command.strip(), host, started)
            print(f"recorded {path.relative_to(REPO)} and a section in {LEDGER.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
