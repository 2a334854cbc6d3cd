"""The ``sectorflow`` command: one subcommand per service or task.

Each subcommand lives with its component, in a module exposing ``register(subparsers)``, which
adds a parser whose ``run`` default takes ``(args, config)`` and returns an exit code. This module
only loads the configuration, sets up logging and turns our errors into one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from sectorflow import __version__
from sectorflow.configs import ConfigError, load_config
from sectorflow.errors import SectorflowError, UsageError
from sectorflow.heap import keep_messages_on_heap
from sectorflow.logs import configure_logging

# Modules that contribute subcommands, in the order --help lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "sectorflow.orchestration.cli",
    "sectorflow.operations.acquire",
    "sectorflow.operations.abort",
    "sectorflow.kvstore.cli",
    "sectorflow.operations.status_cli",
    "sectorflow.aggregator.cli",
    "sectorflow.producer.cli",
    "sectorflow.consumer.nodegroup.cli",
    "sectorflow.operations.session_cli",
    "sectorflow.simulator.cli",
    "sectorflow.live.cli",
    "sectorflow.consumer.counting.export_cli",
    "sectorflow.libertem_bridge.cli",
    "sectorflow.security.cli",
    "sectorflow.dashboard.cli",
)

# What a user can meet and act on (every sectorflow error, a file the system refuses): one line.
EXPECTED_ERRORS = (SectorflowError, OSError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sectorflow",
        description="Stream detector sectors from receiver servers into HPC compute-node memory, "
        "count electrons there and write one HDF5 file per scan.",
        epilog="Every subcommand takes --config FILE (default: the shipped configs/local.toml). "
        "Run 'sectorflow SUBCOMMAND --help' for its options.",
    )
    parser.add_argument("--version", action="version", version=f"sectorflow {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """The --config option every subcommand shares."""
    parser.add_argument(
        "--config", metavar="FILE", default=None,
        help="configuration file (TOML); default: the shipped configs/local.toml",
    )


def add_verbose_argument(parser: argparse.ArgumentParser) -> None:
    """-v of an operator's command (acquire, abort): without it, its logs below WARNING (the kvstore
    client's connection lines) stay out of the command's own lines."""
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also log at the configuration's [logging] level (the kvstore connection, ...)")


def _log_level(args: argparse.Namespace, config_level: str) -> str:
    """The configured level; at least WARNING for a command with -v (add_verbose_argument) not given."""
    if getattr(args, "verbose", True) or logging.getLevelName(config_level) >= logging.WARNING:
        return config_level
    return "WARNING"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        configure_logging(args.command, _log_level(args, config.logging.level))
        keep_messages_on_heap()
        return int(args.run(args, config) or 0)
    except EXPECTED_ERRORS as error:
        print(f"sectorflow {args.command}: error: {error}", file=sys.stderr)
        return 2 if isinstance(error, (ConfigError, UsageError)) else 1
    except KeyboardInterrupt:
        logging.getLogger(__name__).info("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
