"""``sectorflow view``: watch a running scan's virtual images in a terminal or a window."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sectorflow.cli import add_verbose_argument
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError, UsageError, require
from sectorflow.kvstore import Client
from sectorflow.protocol import scan_prefix
from sectorflow.protocol.scan_parts import records_of

from .file_view import view_of_file
from .render import draw, render_text, title_of, write_png
from .subscriber import SYNC_TIMEOUT_S, LiveView, subscribe


def register(subparsers: Any) -> None:
    """Add the ``view`` subcommand."""
    from sectorflow.cli import add_config_argument

    view = subparsers.add_parser(
        "view",
        help="watch a running scan's virtual detectors' and centre-of-mass images, or show a counted file's",
        description="Subscribe to the live stream of every NodeGroup (found through the kvstore) and show a "
        "scan's virtual images as they are counted: as text in the terminal (default), or in a matplotlib "
        "window (--window); --png OUT saves the last view as a PNG. Ends when the scan is complete or after "
        "--timeout; exits 0 if the scan completed, 1 if the timeout came first, and with one line if no kvstore "
        "answers. With FILE, shows a finished scan's counted HDF5 file the same way instead (its "
        "/virtual_images). The detectors are the [[analysis.virtual_detectors]] of the NodeGroups' configuration: "
        "an image each, whatever the scan carries.",
    )
    add_config_argument(view)
    view.add_argument("file", nargs="?", type=Path, default=None, metavar="FILE",
                      help="a counted scan's HDF5 file to show instead of the live stream")
    view.add_argument("--scan", type=int, default=None, metavar="N",
                      help="the scan to watch (default: the first whose frames arrive)")
    view.add_argument("--timeout", type=float, default=None, metavar="S",
                      help="stop after S seconds (default: when the scan completes)")
    view.add_argument("--window", action="store_true", help="draw in a matplotlib window instead of the terminal "
                      "(needs a display)")
    view.add_argument("--png", type=Path, default=None, metavar="OUT", help="save the (last) view as a PNG at OUT")
    add_verbose_argument(view)
    view.set_defaults(run=run_view)


def finished_file(config: Config, scan: int) -> tuple[str, Path] | None:
    """(outcome, path) of ``scan``'s counted file when the kvstore records it written, else None.

    :raises SectorflowError: no kvstore answers.
    """
    with Client.from_config(config, subtree=scan_prefix(scan), name="view") as client:
        if not client.wait_synced(SYNC_TIMEOUT_S):
            raise SectorflowError(f"no kvstore server answered at {config.kvstore.address} "
                                  f"within {SYNC_TIMEOUT_S:g} s; is the stack up ('sectorflow up')?")
        file = records_of(client.subtree(scan_prefix(scan)), scan).file
    return (file.outcome, Path(file.path)) if file is not None and file.path else None


def _views(args: argparse.Namespace, config: Config) -> Iterator[LiveView]:
    if args.file is not None:
        yield view_of_file(args.file)
        return
    finished = finished_file(config, args.scan) if args.scan is not None else None
    if finished is None:
        yield from subscribe(config, scan=args.scan, timeout_s=args.timeout)
        return
    # A finished scan streams nothing more: its file is what there is to see.
    outcome, path = finished
    print(f"scan {args.scan}: finished ({outcome}); its file: {path}", flush=True)
    if not path.exists():
        raise SectorflowError(f"scan {args.scan}'s file {path} is not on this host; view it where it is, "
                              "'sectorflow view FILE'")
    yield view_of_file(path)


def run_view(args: argparse.Namespace, config: Config) -> int:
    if args.window and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise UsageError("--window needs a display and neither DISPLAY nor WAYLAND_DISPLAY is set: "
                         "save the images with --png OUT, or leave out --window for text")
    last = None
    if args.window:
        plt = require("matplotlib.pyplot", "plot", "to draw the view in a window")
        figure = plt.figure(figsize=(18, 4), constrained_layout=True)
        plt.ion()
        for last in _views(args, config):
            draw(figure, last, title_of(last))
            plt.pause(0.01)  # lets the window draw
        plt.ioff()
        if last is not None:
            plt.show()
    else:
        clear = sys.stdout.isatty() and args.file is None
        for last in _views(args, config):
            print(("\x1b[2J\x1b[H" if clear else "") + render_text(last) + ("" if clear else "\n"), flush=True)
    if last is None:
        print("no live frames arrived (is a scan running? 'sectorflow acquire')", file=sys.stderr)
        return 1
    if args.png is not None:
        print(f"picture: {write_png(last, args.png)}")
    return 0 if last.complete else 1
