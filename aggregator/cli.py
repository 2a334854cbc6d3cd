"""The ``sectorflow aggregator`` subcommand: run the relay as a daemon."""

from __future__ import annotations

import argparse
from typing import Any

from sectorflow.configs import Config

from .daemon import run_aggregator


def register(subparsers: Any) -> None:
    """Add the ``aggregator`` subcommand."""
    from sectorflow.cli import add_config_argument

    parser = subparsers.add_parser(
        "aggregator",
        help="run the relay from the producers to the NodeGroups as a daemon",
        description="Run the aggregator: one thread per [[receivers]] entry; thread r binds a PULL "
        "socket on [aggregator] bind_host:base_port+r, sums the info messages of receiver r's "
        "producer threads, forwards each NodeGroup its expected count and pushes every data "
        "message unchanged to NodeGroup routing[frame mod n] of its scan. NodeGroups are found in "
        "the kvstore (nodegroups/*). Publishes status/aggregator/t<r> (state, scan, messages, "
        "bytes, malformed and lost counts). Runs until SIGTERM or SIGINT and exits 0; exits "
        "non-zero with one line naming the address if a port is taken. With [aggregator] standby_host "
        "set, it relays only while it holds the kvstore's lease status/aggregator/active and waits as a standby "
        "otherwise, taking over when the lease is not renewed for [aggregator] takeover_s. With [aggregator] tier "
        "listing k aggregators, each runs with --member i and relays the frames f with f mod k = i; its thread r is "
        "relay thread i x receivers + r (port base_port + i x receivers + r, status/aggregator/t<i x receivers + r>); "
        "with a standby too, member i holds the lease status/aggregator/active-<i> and the standby takes whichever "
        "member's lease is not renewed, relaying that member's slice on its ports.",
    )
    add_config_argument(parser)
    parser.add_argument("--standby", action="store_true",
                        help="start as the standby: let the aggregators started alongside take their leases first, "
                        "then stand in for whichever stops renewing its lease (needs [aggregator] standby_host)")
    parser.add_argument("--member", type=int, default=0, metavar="I",
                        help="this aggregator's index in [aggregator] tier (default 0: the first, or the only one)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, config: Config) -> int:
    """``sectorflow aggregator``: relay until SIGTERM/SIGINT."""
    return run_aggregator(config, standby=args.standby, member=args.member)
