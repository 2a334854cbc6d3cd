"""``sectorflow export FILE --to raw_csr|hspy OUT``: a counted file in the format a scientist's tool opens.

The formats are consumer/counting/export.py's. Exit codes: 0 written; 2 an argument that cannot be used (no
such FILE, a bad --region, an OUT of the wrong suffix, a dense region over --max-gb); 1 a FILE that
is not a counted scan, an OUT that exists, or a write that failed (what was begun is removed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from sectorflow.configs import Config

from .export import FORMATS, export_hspy, export_raw_csr

#: At most one progress line this often, and none for an export shorter than that.
PROGRESS_PERIOD_S = 2.0


def register(subparsers: Any) -> None:
    """Add the ``export`` subcommand."""
    from sectorflow.cli import add_config_argument

    parser = subparsers.add_parser(
        "export",
        help="write a counted file in LiberTEM's raw_csr or HyperSpy's .hspy format",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write the events of a counted scan's HDF5 file (FOURD_<scan>_counted.h5) in another tool's "
        "format.\n\n"
        "  --to raw_csr  OUT.toml: LiberTEM's raw_csr (ctx.load('raw_csr', path='OUT.toml')), the whole scan as\n"
        "                sparse rows, the size of the events; three files beside it: OUT.indptr.raw (int64),\n"
        "                OUT.indices.raw (uint32 flat pixel indices), OUT.data.raw (uint8 ones).\n"
        "  --to hspy     OUT.hspy: HyperSpy's HDF5 format (hyperspy.api.load, rsciio.hspy.file_reader), a dense\n"
        "                uint8 4D array (scan rows, scan cols, frame rows, frame cols) of a --region of the scan,\n"
        "                compressed; py4DSTEM.DataCube(data=...) takes that array. Dense is 331 KB a 576 x 576\n"
        "                frame: choose a region, or raise --max-gb.\n\n"
        "The counted file's NeXus group (/entry, NXevent_data) needs no export: scippnexus and h5py read it "
        "in place.\nProgress goes to stderr every 2 s on a long export. Exit codes: 0 written; 2 an argument "
        "that cannot be used (no such FILE, a bad --region, OUT's suffix, a region over --max-gb); 1 FILE is "
        "not a counted scan, OUT exists (never replaced), or the write failed (what was begun is removed).",
    )
    add_config_argument(parser)
    parser.add_argument("file", type=Path, metavar="FILE", help="the counted scan's HDF5 file")
    parser.add_argument("--to", required=True, choices=FORMATS, help="the format: raw_csr (LiberTEM) or hspy "
                        "(HyperSpy, py4DSTEM)")
    parser.add_argument("output", type=Path, metavar="OUT", help="the file to write: OUT.toml for raw_csr, "
                        "OUT.hspy for hspy; it must not exist")
    parser.add_argument("--region", default=None, metavar="ROW0:ROW1,COL0:COL1",
                        help="hspy only: the scan positions to export, ends exclusive (default: the whole scan)")
    parser.add_argument("--max-gb", type=float, default=8.0, metavar="GB",
                        help="hspy only: refuse a dense array larger than this (default 8)")
    parser.set_defaults(run=run)


class _Progress:
    """One line on ``stream`` at most every PROGRESS_PERIOD_S."""

    def __init__(self, what: str, stream: TextIO) -> None:
        self.what, self.stream = what, stream
        self.start_s = self.last_s = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last_s >= PROGRESS_PERIOD_S:
            self.last_s = now
            print(f"{self.what}: {done} of {total} positions ({100 * done / max(total, 1):.0f} %, "
                  f"{now - self.start_s:.0f} s)", file=self.stream, flush=True)


def run(args: argparse.Namespace, config: Config) -> int:
    from sectorflow.errors import UsageError

    if args.to == "raw_csr" and (args.region is not None):
        raise UsageError("--region applies to --to hspy; raw_csr holds the whole scan")
    if args.max_gb <= 0:
        raise UsageError(f"--max-gb {args.max_gb:g}: expected a positive size")
    progress = _Progress(f"export {args.file.name}", sys.stderr)
    if args.to == "raw_csr":
        paths = export_raw_csr(args.file, args.output, progress=progress)
        print(f"{args.file}: exported to {paths['toml']} (LiberTEM raw_csr; with {paths['indptr'].name}, "
              f"{paths['indices'].name}, {paths['data'].name})", flush=True)
    else:
        out, region = export_hspy(args.file, args.output, region=args.region, max_bytes=int(args.max_gb * 1e9),
                                  progress=progress)
        print(f"{args.file}: exported scan rows {region.row0}:{region.row1}, cols {region.col0}:{region.col1} to "
              f"{out} (HyperSpy .hspy, dense uint8)", flush=True)
    return 0
