"""``sectorflow simulate``: generate a scan with the configured simulator, optionally as raw files."""

from __future__ import annotations

import argparse
from typing import Any

from sectorflow.cli import add_config_argument
from sectorflow.configs import Config
from sectorflow.errors import UsageError

from .from_config import pacer_from_config, simulator_from_config
from .scan import parse_scan_shape, simulate_scan


def register(subparsers: Any) -> None:
    """Add the ``simulate`` subcommand."""
    parser = subparsers.add_parser(
        "simulate",
        help="generate a simulated scan; with --out, write it as raw 4D Camera files",
        description="Generate every sector of a scan with the [simulator] settings on the [detector] "
        "geometry of the configuration, paced to simulator.rate_hz if set, and print a summary "
        "(frames, bytes, GB/s, mean electrons per frame, dropped sectors). With --out, write the "
        "scan as raw version-5 files data_scan{N:010d}_module{sector}_0.data that stempy reads.",
    )
    add_config_argument(parser)
    parser.add_argument(
        "--scan-shape", required=True, metavar="XxY",
        help="probe positions per row x rows of positions, e.g. 128x128 (each 1 to 65535)",
    )
    parser.add_argument("--scan-number", default="1", metavar="N", help="scan number (default: 1)")
    parser.add_argument(
        "--out", metavar="DIR", default=None,
        help="write raw files to DIR (created if missing; existing files of the scan are never overwritten)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, config: Config) -> int:
    """Simulate the scan and print its summary; returns the exit code."""
    scan_x, scan_y = parse_scan_shape(args.scan_shape)
    try:
        scan_number = int(args.scan_number)
    except ValueError:
        raise UsageError(f"--scan-number {args.scan_number!r}: expected an integer from 0 to 4294967295") from None
    pacer = pacer_from_config(config) if config.simulator.rate_hz > 0 else None
    summary = simulate_scan(
        simulator_from_config(config), scan_number, scan_x, scan_y, out_dir=args.out, pacer=pacer,
        first_frame=config.simulator.first_frame,
    )
    print(summary.describe())
    if args.out is not None:
        print(f"wrote {len(summary.files)} raw files to {args.out}")
    return 0
