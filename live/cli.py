"""``sectorflow view``: watch a running scan's virtual images in a terminal or a window."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sectorflow.configs import Config
from sectorflow.errors import require

from .render import render_text
from .subscriber import subscribe


def register(subparsers: Any) -> None:
    """Add the ``view`` subcommand."""
    from sectorflow.cli import add_config_argument

    view = subparsers.add_parser(
        "view",
        help="watch a running scan's bright-field, dark-field and centre-of-mass images",
        description="Subscribe to the live stream of every NodeGroup (found through the kvstore) and show a "
        "scan's virtual images as they are counted: as text in the terminal (default), or in a matplotlib "
        "window (--window). Ends when the scan is complete or after --timeout; exits 0 if the scan completed, "
        "1 if the timeout came first, and with one line if no kvstore answers. The detectors are the "
        "[analysis] table's.",
    )
    add_config_argument(view)
    view.add_argument("--scan", type=int, default=None, metavar="N",
                      help="the scan to watch (default: the first whose frames arrive)")
    view.add_argument("--timeout", type=float, default=None, metavar="S",
                      help="stop after S seconds (default: when the scan completes)")
    view.add_argument("--window", action="store_true", help="draw in a matplotlib window instead of the terminal")
    view.set_defaults(run=run_view)


def run_view(args: argparse.Namespace, config: Config) -> int:
    views = subscribe(config, scan=args.scan, timeout_s=args.timeout)
    last = None
    if args.window:
        plt = require("matplotlib.pyplot", "plot", "to draw the live view in a window")
        import numpy as np

        figure, axes = plt.subplots(1, 5, figsize=(18, 4), constrained_layout=True)
        plt.ion()
        for last in views:
            for ax, name in zip(axes, ("bright_field", "dark_field", "com_x", "com_y")):
                ax.clear()
                ax.imshow(last.images[name], cmap="gray" if name.endswith("field") else "RdBu")
                ax.set_title(name.replace("_", " "))
            axes[4].clear()
            axes[4].imshow(np.log1p(last.diffraction), cmap="magma")
            axes[4].set_title("summed diffraction, log(1 + electrons)")
            figure.suptitle(f"scan {last.scan}: {last.positions_counted} positions counted")
            plt.pause(0.01)  # lets the window draw
        plt.ioff()
        if last is not None:
            plt.show()
    else:
        clear = sys.stdout.isatty()
        for last in views:
            print(("\x1b[2J\x1b[H" if clear else "") + render_text(last) + ("" if clear else "\n"), flush=True)
    if last is None:
        print("no live frames arrived (is a scan running? 'sectorflow acquire')", file=sys.stderr)
        return 1
    return 0 if last.complete else 1
