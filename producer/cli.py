"""``sectorflow producer``: the producer daemon of one receiver server."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from sectorflow.cli import add_config_argument
from sectorflow.configs import Config
from sectorflow.errors import UsageError
from sectorflow.service import stop_on_signals

from .daemon import ProducerDaemon


def register(subparsers: Any) -> None:
    """Add the ``producer`` subcommand."""
    parser = subparsers.add_parser(
        "producer",
        help="run the producer daemon of one receiver (streams its sector of every requested scan)",
        description="Run receiver R's producer: receivers[R].threads threads, thread t sending the frames f "
        "with f % T == t of sector R. It watches acquire/request in the kvstore and acquires each requested "
        "scan once, from the simulator or (source replay) from the raw files in producer.fallback_dir. "
        "At scan start each thread takes the request's routing list: NodeGroups listed -> it streams to "
        "aggregator thread R (aggregator.host:base_port+R); none -> it writes raw version-5 files to "
        "producer.fallback_dir. Status: status/producer/r<R>t<T>. Stops cleanly on SIGTERM or Ctrl-C.",
    )
    add_config_argument(parser)
    parser.add_argument("--receiver", required=True, metavar="R", help="receiver index (= sector), from 0")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, config: Config) -> int:
    """Serve until SIGTERM; returns the exit code."""
    try:
        receiver = int(args.receiver)
    except ValueError:
        raise UsageError(f"--receiver {args.receiver!r}: expected an integer from 0") from None
    daemon = ProducerDaemon(config, receiver)
    with stop_on_signals(logging.getLogger(__name__), on_stop=daemon.stop):
        return daemon.run()
