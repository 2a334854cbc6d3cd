"""Run the registered benchmarks: ``python -m bench [--only NAME ...] [--config FILE] [--quick]``.

Prints each result as a table, writes it as JSON and a PNG plot to bench/results/NAME-TIMESTAMP.*,
appends a dated section (command, machine, figures) to BENCHMARKS.md at the repository root and
updates the targets table at its top. A benchmark that fails is reported on stderr and the others
still run; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import logging
import os
import platform
import shlex
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench import BENCHMARKS, BenchmarkResult, RunOptions
from bench.report import merge_targets, section, table, target_rows

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
LEDGER = REPO / "BENCHMARKS.md"
LEDGER_HEAD = ("# Benchmarks\n\n`make bench` (or `python -m bench`) appends a dated section per benchmark; "
               "newest last.\n")


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


def record(name: str, module: Any, result: BenchmarkResult, command: str, host: dict[str, Any],
           started: dt.datetime, seconds: float) -> Path:
    """Write the JSON file and the plot, append the BENCHMARKS.md section, update the targets; returns the JSON path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"{name}-{started.strftime('%Y%m%dT%H%M%SZ')}"
    json_path, png_path = stem.with_suffix(".json"), stem.with_suffix(".png")
    json_path.write_text(json.dumps({
        "benchmark": name,
        "started": started.isoformat(),
        "seconds": seconds,
        "command": command,
        "machine": host,
        "columns": result.columns,
        "rows": result.rows,
        "notes": result.notes,
        "targets": [vars(t) for t in result.targets],
        "tables": [vars(t) for t in result.tables],
        "details": result.details,
    }, indent=2, default=str) + "\n")
    module.plot(result, png_path)
    ledger = LEDGER.read_text() if LEDGER.exists() else LEDGER_HEAD
    ledger = ledger.rstrip("\n") + "\n\n" + section(name, result, command, host, started, seconds,
                                                     str(json_path.relative_to(REPO)), str(png_path.relative_to(REPO)))
    if result.targets:
        ledger = merge_targets(ledger, name, target_rows(name, result.targets, started), list(BENCHMARKS))
    LEDGER.write_text(ledger)
    return json_path


def exit_on_sigterm(signum: int, frame: object) -> None:
    """A run stopped by SIGTERM (timeout, kill) unwinds like Ctrl-C, so every Supervisor block stops
    the services it started instead of leaving them running; a second SIGTERM must not cut that short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run sectorflow's benchmarks; print tables; record JSON, PNG plots and BENCHMARKS.md sections.",
    )
    parser.add_argument("--only", action="append", choices=list(BENCHMARKS), metavar="NAME",
                        help=f"run only this benchmark (repeatable); one of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="configuration file (TOML); default: the shipped configs/local.toml")
    parser.add_argument("--quick", action="store_true",
                        help="leave out the time to science of a 256 x 256 scan (about 5 of the 10 minutes); for a "
                             "first look, not for BENCHMARKS.md figures")
    parser.add_argument("--no-record", action="store_true",
                        help="print only; write neither bench/results/ nor BENCHMARKS.md")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s %(message)s")

    from sectorflow.configs import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"bench: error: {error}", file=sys.stderr)
        return 2
    command = ("python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)).strip()
    options = RunOptions(quick=args.quick)
    host = machine()
    failed: list[str] = []
    begun = time.monotonic()
    for name in args.only or list(BENCHMARKS):
        module = importlib.import_module(BENCHMARKS[name])
        started = dt.datetime.now(dt.timezone.utc)
        clock = time.monotonic()
        print(f"== {name}: {module.DESCRIPTION}", flush=True)
        try:
            result: BenchmarkResult = module.run(config, options)
        except Exception as error:  # one broken benchmark must not cost the others' figures
            traceback.print_exc()
            print(f"bench: error: {name}: {error}", file=sys.stderr)
            failed.append(name)
            continue
        seconds = time.monotonic() - clock
        print(table(result.columns, result.rows))
        for extra in result.tables:
            print(f"\n{extra.title}:\n{table(extra.columns, extra.rows)}")
        for note in result.notes:
            print(f"- {note}")
        for target in result.targets:
            print(f"- target: {target.name}: {target.goal}, measured {target.measured}: "
                  f"{'met' if target.met else 'MISSED'}")
        print(f"({seconds:.0f} s)", flush=True)
        if not args.no_record:
            path = record(name, module, result, command, host, started, seconds)
            print(f"recorded {path.relative_to(REPO)}, its plot, and a section in {LEDGER.name}", flush=True)
    print(f"bench: {time.monotonic() - begun:.0f} s in all" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
