"""``sectorflow session submit | list | cancel``: streaming sessions as Slurm jobs."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from sectorflow.cli import add_config_argument
from sectorflow.configs import Config
from sectorflow.security.session_keys import PREFIX as SESSION_KEYS_PREFIX
from sectorflow.security.session_keys import make_session_key_dir

from .session_script import SessionRequest, render_script
from .slurm import cancel, list_sessions, submit


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "session", help="run NodeGroups as a Slurm streaming session",
        description="A streaming session is a Slurm job running the NodeGroups: while it runs, scans "
        "stream into it; when it ends (walltime or cancel), scans fall back to raw files on disk.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    submit_parser = actions.add_parser(
        "submit", help="render the batch script and submit it with sbatch",
        description="Render configs/slurm/session.sh.j2 (or [slurm] template) with the [slurm] settings "
        "and submit it. --nodes and --time override the configuration.",
    )
    add_config_argument(submit_parser)
    submit_parser.add_argument("--nodes", type=int, help="compute nodes (default: [slurm] nodes)")
    submit_parser.add_argument("--time", help="walltime HH:MM[:SS] (default: [slurm] time)")
    submit_parser.add_argument("--output", type=Path, help="HDF5 output directory (default: [nodegroup] output_dir)")
    submit_parser.add_argument("--log-dir", type=Path, default=Path("sessions"),
                               help="where the job's log goes (default: ./sessions)")
    submit_parser.add_argument("--dry-run", action="store_true", help="print the batch script, submit nothing")
    submit_parser.set_defaults(run=run_submit)

    list_parser = actions.add_parser("list", help="list running and pending sessions")
    add_config_argument(list_parser)
    list_parser.set_defaults(run=run_list)

    cancel_parser = actions.add_parser("cancel", help="cancel a session (its NodeGroups deregister)")
    add_config_argument(cancel_parser)
    cancel_parser.add_argument("job_id", metavar="ID", help="job id from 'sectorflow session list'")
    cancel_parser.set_defaults(run=run_cancel)


def run_submit(args: argparse.Namespace, config: Config) -> int:
    request = SessionRequest.from_config(config, args.log_dir, args.nodes, args.time, args.output)
    if args.dry_run:
        if config.security.enabled:
            request = replace(request, key_dir=request.log_dir / f"{SESSION_KEYS_PREFIX}XXXXXXXX")
        print(render_script(request), end="")
        return 0
    request.log_dir.mkdir(parents=True, exist_ok=True)
    if config.security.enabled:
        request = replace(request, key_dir=make_session_key_dir(config, request.log_dir))
    job_id = submit(render_script(request), request.log_dir)
    print(f"submitted session job {job_id} ({request.slurm.nodes} node(s), {request.slurm.time}); "
          f"log: {request.log_dir}/sectorflow-session-{job_id}.log")
    return 0


def run_list(args: argparse.Namespace, config: Config) -> int:
    jobs = list_sessions()
    if not jobs:
        print("no sessions")
        return 0
    print(f"{'JOBID':>8}  {'STATE':<10} {'USED':>10} {'LIMIT':>10} {'NODES':>5}")
    for job in jobs:
        print(f"{job.job_id:>8}  {job.state:<10} {job.time_used:>10} {job.time_limit:>10} {job.nodes:>5}")
    return 0


def run_cancel(args: argparse.Namespace, config: Config) -> int:
    cancel(args.job_id)
    print(f"cancelled session job {args.job_id}")
    return 0
