"""``sectorflow status``: the kvstore's live state as tables (status_table.py), once or refreshed."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from sectorflow.aggregator.tier import describe as describe_tier
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client, client_options
from sectorflow.protocol import SERVICE_AGGREGATOR
from sectorflow.service import stop_on_signals

from .run_dir import default_run_dir, restart_note
from .scan_account import config_argument
from .status_table import render

logger = logging.getLogger(__name__)

# `sectorflow status` waits at least this long for a server before giving up (seconds).
MIN_STATUS_TIMEOUT_S = 2.0


def register(subparsers: Any) -> None:
    """Add the ``status`` subcommand."""
    from sectorflow.cli import add_config_argument

    status = subparsers.add_parser(
        "status",
        help="print who is registered and what each service is doing",
        description="Print the live state of the kvstore as tables under a header naming the server, "
        "its stack id and sequence: every service's state, scan, message and byte counts (a service "
        "of another stack, or moved to a new one, flagged), the registered NodeGroups and the acquire "
        "request, what the server refused (by kind) and the entries that do not decode. Exits non-zero "
        "with one line if no server answers within the timeout.",
    )
    add_config_argument(status)
    status.add_argument("--run-dir", type=Path, default=None, help="the run directory given to 'up' (default: "
                        "runs/<config name>): where 'up' kept the configuration it started with, to say when the file "
                        "changed since (restart to apply)")
    status.add_argument("--watch", action="store_true", help="keep refreshing until Ctrl-C")
    status.add_argument("--interval", type=_positive, default=1.0, metavar="S",
                        help="seconds between refreshes with --watch (default: 1)")
    status.add_argument("--timeout", type=_positive, default=None, metavar="S",
                        help="seconds to wait for the server (default: silence_heartbeats x "
                        f"heartbeat_ms, at least {MIN_STATUS_TIMEOUT_S:g})")
    status.set_defaults(run=run_status)


def run_status(args: argparse.Namespace, config: Config) -> int:
    """``sectorflow status``: print the tables once, or every ``--interval`` with ``--watch``."""
    kv = config.kvstore
    # A client of a pair whose first server is silent moves to the second after one silence period.
    timeout_s = args.timeout or max(MIN_STATUS_TIMEOUT_S, kv.silence_heartbeats * kv.heartbeat_ms / 1000) * len(
        kv.addresses)
    where = " or ".join(f"tcp://{address}" for address in kv.addresses)
    with Client(client_options(config, log=lambda message: logger.debug("kvstore client: %s", message))) as client:
        if not client.wait_synced(timeout_s):
            raise SectorflowError(
                f"no kvstore server answered at {where} within {timeout_s:g} s; "
                f"start one with 'sectorflow kvstore --config {config.source}'"
            )
        if not args.watch:
            _show(client, config, clear=False, run_dir=args.run_dir)
            return 0
        # Ctrl-C ends the loop between two refreshes, never in the middle of the kvstore client's
        # work (a KeyboardInterrupt raised anywhere could leave it unable to close).
        with stop_on_signals(logger) as stop:
            while not stop.is_set():
                _show(client, config, clear=sys.stdout.isatty(), run_dir=args.run_dir)
                stop.wait(args.interval)  # the refresh period the user asked for
        return 0


def _show(client: Client, config: Config, clear: bool, run_dir: Path | None) -> None:
    from sectorflow._core.protocol import wall_clock_s

    state = "live" if client.synced() else "SERVER SILENT, last known state"
    stack = client.stack_id or "unknown (the server names none)"
    # The server it syncs with: of a pair, the one it moved to last.
    title = f"kvstore tcp://{client.server}: stack {stack}, sequence {client.sequence()}, {state}"
    producers = {f"r{r}t{t}": r for r, receiver in enumerate(config.receivers) for t in range(receiver.threads)}
    text = render(client.subtree(), wall_clock_s(), title, config_argument(config.source), producers,
                  describe_tier(config, client.statuses(SERVICE_AGGREGATOR)))
    note = restart_note(config, run_dir or default_run_dir(config))
    if note:
        text = f"{note}\n{text}"
    print(("\x1b[2J\x1b[H" if clear else "") + text + ("" if clear else "\n"), flush=True)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds > 0")
    return value
