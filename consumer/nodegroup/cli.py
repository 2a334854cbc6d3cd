"""The ``sectorflow nodegroup`` subcommand: this MPI rank's NodeGroups, until stopped."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from sectorflow.configs import Config
from sectorflow.errors import import_mpi
from sectorflow.logs import configure_logging
from sectorflow.security.options import with_key_dir
from sectorflow.service import stop_on_signals

from .nodegroup_service import DEFAULT_JOB, NodeGroupService, options_from

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add the ``nodegroup`` subcommand."""
    from sectorflow.cli import add_config_argument

    parser = subparsers.add_parser(
        "nodegroup",
        help="receive, assemble and count scans on compute nodes (run under mpiexec or srun)",
        description="Run this MPI rank's NodeGroups (launch one rank per node with mpiexec or srun). Each "
        "NodeGroup binds one port per aggregator thread on [nodegroup] host, registers itself in the kvstore "
        "(nodegroups/<uid>, status/nodegroup/<uid>), assembles and counts the frames routed to it, and hands "
        "each finished scan to rank 0, which writes FOURD_<scan:010d>_counted.h5 in the output directory and "
        "the scan's file record (scans/<n>/file). Serves scan after scan until SIGTERM/SIGINT or --duration, "
        "then deregisters and exits 0. The job is one unit: when one rank dies or hangs, the others deregister "
        "at once, rank 0 writes what it holds, and the job exits 1. A job that cannot write its output "
        "directory registers nothing and exits 1, and so does a job while a live job of its name (--job) serves the "
        "stack, naming that job's host and pid, or a rank whose host name another machine's NodeGroup advertises.",
    )
    add_config_argument(parser)
    parser.add_argument("--groups-per-rank", type=int, default=None, metavar="G",
                        help="NodeGroups in each rank (default: [nodegroup] groups_per_rank)")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="counting threads per NodeGroup (default: [nodegroup] counting_threads)")
    parser.add_argument("--output", default=None, metavar="DIR",
                        help="directory of the HDF5 files (default: [nodegroup] output_dir)")
    parser.add_argument("--no-counting", action="store_true",
                        help="assemble frames without counting electrons (each frame written with no events): "
                        "what transport and assembly alone cost, for benchmarks")
    parser.add_argument("--duration", type=float, default=0.0, metavar="S",
                        help="stop after S seconds (default 0: run until SIGTERM or SIGINT)")
    parser.add_argument("--job", default="", metavar="NAME",
                        help=f"the job's name (default {DEFAULT_JOB!r}): a stack serves one live job of a name, so a "
                        "second one (another 'sectorflow up' of the stack, an old job still running) is refused; "
                        "jobs that serve a stack side by side need names of their own")
    parser.add_argument("--key-dir", default=None, metavar="DIR",
                        help="key directory (default: [security] key_dir); a streaming session passes the "
                        "private one its submission made")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, config: Config) -> int:
    """``sectorflow nodegroup``: serve until stopped; 0 after a clean leave."""
    if args.key_dir is not None:
        config = with_key_dir(config, args.key_dir)
    options = options_from(config, args.groups_per_rank, args.threads, args.output, args.duration,
                           count=not args.no_counting, job=args.job)
    comm = import_mpi().COMM_WORLD  # imported here: only this subcommand needs MPI
    configure_logging(f"nodegroup[{comm.Get_rank()}]", config.logging.level)
    with stop_on_signals(log) as stop:
        service = NodeGroupService(config, options, comm)
        try:
            service.start()
        except BaseException:
            service.client.close()
            raise
        code = service.run(stop)
    if code != 0:
        _end_broken_job(comm, code, service.rank, rank0_gone=0 in service.dead_ranks())
    return code


def _end_broken_job(comm: Any, code: int, rank: int, rank0_gone: bool) -> None:
    """A rank of the job vanished, or gave rank 0 no goodbye: MPI cannot finalize without it
    (MPI_Finalize would wait for it forever), so the job ends by MPI_Abort, which the launcher turns into the end of every rank.
    Rank 0 aborts once it has written what it held; the other ranks wait in MPI_Finalize for that,
    unless rank 0 is the one gone."""
    if rank == 0 or rank0_gone:
        logging.shutdown()  # the lines saying why are out before the abort
        comm.Abort(code)
