"""``sectorflow up`` / ``sectorflow down``: the stack of a configuration as supervised local services."""

from __future__ import annotations

import argparse
from pathlib import Path

from sectorflow.cli import add_config_argument
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client

from .readiness import Expected, wait_ready
from .stack import stack_services
from .supervisor import Supervisor, load_running, stop_services


def default_run_dir(config: Config) -> Path:
    return Path("runs") / Path(config.source).stem


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--run-dir", type=Path, help="where service logs and the services file go "
                        "(default: runs/<config name>)")
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks of NodeGroups under mpiexec (default 2)")
    parser.add_argument("--no-nodegroups", action="store_true",
                        help="start no NodeGroups (a Slurm session provides them, or scans go to disk)")
    parser.add_argument("--output", type=Path, help="HDF5 output directory (default: [nodegroup] output_dir)")
    parser.add_argument("--ready-timeout", type=float, default=120.0, metavar="S",
                        help="seconds to wait for every service to announce itself (default 120)")


def register(subparsers: argparse._SubParsersAction) -> None:
    up = subparsers.add_parser(
        "up", help="start the pipeline's services on this machine and leave them running",
        description="Start the kvstore, the aggregator, NodeGroups under mpiexec and one producer per "
        "receiver as background services, each logging to <run-dir>/<service>.log; wait until all "
        "have registered; then return. Acquire scans with 'sectorflow acquire'; stop with 'sectorflow down'.",
    )
    add_stack_arguments(up)
    up.set_defaults(run=run_up)

    down = subparsers.add_parser("down", help="stop the services 'sectorflow up' started",
                                 description="Stop (SIGTERM, then SIGKILL after a grace period) every "
                                 "service recorded in <run-dir>/services.json.")
    add_config_argument(down)
    down.add_argument("--run-dir", type=Path, help="the run directory given to 'up' (default: runs/<config name>)")
    down.add_argument("--grace", type=float, default=20.0, metavar="S", help="seconds before SIGKILL (default 20)")
    down.set_defaults(run=run_down)


def start_stack(config: Config, args: argparse.Namespace, run_dir: Path) -> Supervisor:
    """Start every service of the stack and wait until it is ready; on failure stop what started."""
    if any(Path(f"/proc/{service.pid}").exists() for service in load_running(run_dir)):
        raise SectorflowError(f"{run_dir} already has running services: run 'sectorflow down --run-dir {run_dir}' first")
    supervisor = Supervisor(run_dir)
    try:
        services = stack_services(config, args.ranks, args.output, with_nodegroups=not args.no_nodegroups)
        for spec in services:
            supervisor.start(spec)
        groups = 0 if args.no_nodegroups else args.ranks * config.nodegroup.groups_per_rank
        with Client.from_config(config, name="up") as client:
            wait_ready(client, Expected.of(config, groups), args.ready_timeout, supervisor.check)
    except BaseException:
        supervisor.stop_all()
        raise
    return supervisor


def run_up(args: argparse.Namespace, config: Config) -> int:
    run_dir = args.run_dir or default_run_dir(config)
    start_stack(config, args, run_dir)
    print(f"sectorflow is up ({config.source}); logs in {run_dir}/. "
          f"Acquire with 'sectorflow acquire --config {config.source} --scan-number N --scan-shape XxY', "
          f"stop with 'sectorflow down --run-dir {run_dir}'.")
    return 0


def run_down(args: argparse.Namespace, config: Config) -> int:
    run_dir = args.run_dir or default_run_dir(config)
    services = load_running(run_dir)
    if not services:
        print(f"nothing to stop in {run_dir}")
        return 0
    stop_services(list(reversed(services)), args.grace)
    (run_dir / "services.json").write_text("[]")
    print(f"stopped {len(services)} services ({', '.join(s.name for s in services)})")
    return 0
