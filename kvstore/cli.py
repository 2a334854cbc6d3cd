"""The ``sectorflow kvstore`` subcommand: run the state server (``sectorflow status`` reads it:
sectorflow.operations)."""

from __future__ import annotations

import argparse
from typing import Any

from sectorflow.configs import Config

from .daemon import run_server


def register(subparsers: Any) -> None:
    """Add the ``kvstore`` subcommand."""
    from sectorflow.cli import add_config_argument

    server = subparsers.add_parser(
        "kvstore",
        help="run the state server (membership, status) as a daemon",
        description="Run the kvstore server, the Clone pattern of the ZeroMQ Guide: snapshots on "
        "[kvstore] port P (ROUTER), updates published on P+1 (PUB, with HUGZ heartbeats every "
        "heartbeat_ms), client updates collected on P+2 (SUB). Runs until SIGTERM or SIGINT and "
        "exits 0; exits non-zero with one line naming the address if a port is taken.",
    )
    add_config_argument(server)
    server.add_argument(
        "--pair", choices=("primary", "backup"), default="",
        help="run as this server of the Binary Star pair [kvstore] servers lists (primary first): its port is its "
        "entry's, its peer the other, its durable records in log_dir/<pair> (kvstore/SPEC.md, 'The pair')")
    server.set_defaults(run=run_kvstore)


def run_kvstore(args: argparse.Namespace, config: Config) -> int:
    """``sectorflow kvstore``: serve until SIGTERM/SIGINT."""
    return run_server(config, pair=args.pair)
