"""``sectorflow up`` / ``sectorflow down``: the stack of a configuration as supervised local services."""

from __future__ import annotations

import argparse
from pathlib import Path

from sectorflow.cli import add_config_argument
from sectorflow.configs import DEFAULT_CONFIG, Config
from sectorflow.errors import SectorflowError
from sectorflow.operations.run_dir import default_run_dir, forget_snapshot, keep_snapshot, restart_note
from sectorflow.simulator import parse_scan_shape

from .demo import DemoOptions, run_demo
from .stack import DASHBOARD, LIBERTEM, dashboard_url, restart_service, start_stack
from .supervisor import STATE_FILE, load_running, stop_services


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
    parser.add_argument("--no-dashboard", action="store_true",
                        help="start no web dashboard (default: as [dashboard] with_stack says)")


def register(subparsers: argparse._SubParsersAction) -> None:
    up = subparsers.add_parser(
        "up", help="start the pipeline's services on this machine and leave them running",
        description="Start the kvstore, the aggregator, NodeGroups under mpiexec, one producer per "
        "receiver and the web dashboard ([dashboard]) as background services, each logging to "
        "<run-dir>/<service>.log; wait until all have registered; print the dashboard's address; then return. Acquire scans with 'sectorflow acquire'; stop with 'sectorflow down'.",
    )
    add_stack_arguments(up)
    up.add_argument("--only", metavar="SERVICE",
                    help="start one service of the stack running in the run directory again (producer-1, "
                    "aggregator, nodegroups, dashboard, ...: the names 'sectorflow down' prints), stopping it "
                    "first if it still runs; the others run on")
    up.set_defaults(run=run_up)

    down = subparsers.add_parser("down", help="stop the services 'sectorflow up' started",
                                 description="Stop (SIGTERM, then SIGKILL after a grace period) every "
                                 "service recorded in <run-dir>/services.json.")
    add_config_argument(down)
    down.add_argument("--run-dir", type=Path, help="the run directory given to 'up' (default: runs/<config name>)")
    down.add_argument("--grace", type=float, default=20.0, metavar="S", help="seconds before SIGKILL (default 20)")
    down.set_defaults(run=run_down)

    demo = subparsers.add_parser(
        "demo", help="run the whole pipeline on this machine for one simulated scan and summarise it",
        description="Start the stack of the configuration (as 'up' does), acquire one simulated scan, wait "
        "for its HDF5 file, print a summary (frames, bytes, throughput, time from acquisition to file, "
        "electrons per frame, complete/incomplete frames), write a PNG beside the file (a panel per image: "
        "each [[analysis.virtual_detectors]] detector's, centre of mass x and y, summed diffraction pattern) and "
        "the same images as text, and stop everything.",
    )
    add_config_argument(demo)
    demo.add_argument("--scan-shape", default="128x128", metavar="XxY",
                      help="probe positions (default 128x128: about 10.9 GB raw at the 4D Camera's geometry)")
    demo.add_argument("--ranks", type=int, default=2, help="MPI ranks of NodeGroups (default 2)")
    demo.add_argument("--run-dir", type=Path, default=Path("runs/demo"), help="service logs (default runs/demo)")
    demo.add_argument("--output", type=Path, help="HDF5 output directory (default: [nodegroup] output_dir)")
    demo.add_argument("--no-png", action="store_true", help="write no picture")
    demo.set_defaults(run=run_demo_command)


def run_up(args: argparse.Namespace, config: Config) -> int:
    run_dir = args.run_dir or default_run_dir(config)
    if args.only:
        pid = restart_service(config, run_dir, args.only, args.ranks, args.output, args.ready_timeout)
        print(f"{args.only} started again (pid {pid}); logs in {run_dir}/{args.only}.log")
        return 0
    try:
        supervisor = start_stack(config, run_dir, args.ranks, args.output, not args.no_nodegroups,
                                 args.ready_timeout, dashboard=config.dashboard.with_stack and not args.no_dashboard,
                                 libertem=config.libertem.with_stack)
    except SectorflowError as error:
        note = restart_note(config, run_dir)  # the stack already runs, with the file as it was
        raise SectorflowError(f"{error}; {note}" if note else str(error)) from None
    keep_snapshot(config, run_dir)
    print(f"sectorflow is up ({config.source}); logs in {run_dir}/.")
    print(next_commands(config, run_dir))
    if DASHBOARD in supervisor.names():
        print(f"dashboard: {dashboard_url(config)} (Prometheus metrics at {dashboard_url(config)}metrics)")
    if LIBERTEM in supervisor.names():
        print(f"LiberTEM bridge: listening on {config.libertem.listen} (LiberTEM-live's asi_tpx3 data_host and "
              "data_port; examples/libertem_udfs.py)")
    return 0


def next_commands(config: Config, run_dir: Path) -> str:
    """The README's scan loop ("At the microscope") as commands for this stack: --config and
    --run-dir only where this stack is not the default one."""
    source = config.source
    shipped = not source or source.startswith("<") or Path(source).resolve() == DEFAULT_CONFIG.resolve()
    option = "" if shipped else f" --config {Path(source).resolve()}"
    down = "" if run_dir == default_run_dir(config) else f" --run-dir {run_dir}"
    return (f"next: 'sectorflow acquire{option} --scan-shape 256x256 --wait' (the next free scan number; progress, "
            f"then where every sector went), 'sectorflow status{option}{down}', 'sectorflow view{option} --scan N'; "
            f"stop with 'sectorflow down{option}{down}'")


def run_demo_command(args: argparse.Namespace, config: Config) -> int:
    scan_x, scan_y = parse_scan_shape(args.scan_shape)
    options = DemoOptions(scan_x=scan_x, scan_y=scan_y, ranks=args.ranks, run_dir=args.run_dir,
                          output_dir=args.output, png=not args.no_png)
    summary = run_demo(config, options)
    print("\n".join(summary.lines()))
    return 0


def run_down(args: argparse.Namespace, config: Config) -> int:
    run_dir = args.run_dir or default_run_dir(config)
    services = load_running(run_dir)
    if not services:
        print(f"nothing to stop in {run_dir}")
        return 0
    stop_services(list(reversed(services)), args.grace)
    (run_dir / STATE_FILE).write_text("[]")
    forget_snapshot(run_dir)
    print(f"stopped {len(services)} services ({', '.join(s.name for s in services)})")
    return 0
