"""The local stack of a configuration: which services ``sectorflow up`` and the demo run, in order.

kvstore first (everyone registers there), then the aggregator, the NodeGroups under ``mpiexec``
and one producer daemon per receiver.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from sectorflow.configs import Config
from sectorflow.errors import SectorflowError

from sectorflow.kvstore import Client

from .readiness import Expected, wait_ready
from .supervisor import ServiceSpec, Supervisor, load_running


def _sectorflow(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "sectorflow", *args)


def stack_services(config: Config, ranks: int, output_dir: Path | None = None,
                   with_nodegroups: bool = True, counting: bool = True) -> list[ServiceSpec]:
    """The services of ``config``'s pipeline on this machine.

    ``ranks`` MPI ranks of NodeGroups are started with ``mpiexec`` (none if ``with_nodegroups`` is
    false, e.g. when a Slurm session provides them); without ``counting`` they only assemble
    (benchmarks). Raises SectorflowError if mpiexec is missing.
    """
    path = str(Path(config.source).resolve())
    services = [
        ServiceSpec("kvstore", _sectorflow("kvstore", "--config", path)),
        ServiceSpec("aggregator", _sectorflow("aggregator", "--config", path)),
    ]
    if with_nodegroups:
        mpiexec = shutil.which("mpiexec")
        if mpiexec is None:
            raise SectorflowError("mpiexec not found on the PATH: install MPICH (make deps) to run NodeGroups")
        nodegroup = ["nodegroup", "--config", path]
        if output_dir is not None:
            nodegroup += ["--output", str(output_dir.resolve())]
        if not counting:
            nodegroup.append("--no-counting")
        services.append(ServiceSpec("nodegroups", (mpiexec, "-n", str(ranks), *_sectorflow(*nodegroup))))
    for receiver in range(config.n_receivers):
        services.append(ServiceSpec(f"producer-{receiver}",
                                    _sectorflow("producer", "--config", path, "--receiver", str(receiver))))
    return services


def start_stack(config: Config, run_dir: Path, ranks: int, output_dir: Path | None, with_nodegroups: bool,
                ready_timeout_s: float, counting: bool = True) -> Supervisor:
    """Start every service of the stack and wait until it is ready; on failure stop what started."""
    if any(Path(f"/proc/{service.pid}").exists() for service in load_running(run_dir)):
        raise SectorflowError(f"{run_dir} already has running services: run 'sectorflow down --run-dir {run_dir}' first")
    supervisor = Supervisor(run_dir)
    try:
        services = stack_services(config, ranks, output_dir, with_nodegroups=with_nodegroups, counting=counting)
        for spec in services:
            supervisor.start(spec)
        groups = ranks * config.nodegroup.groups_per_rank if with_nodegroups else 0
        with Client.from_config(config, name="up") as client:
            wait_ready(client, Expected.of(config, groups), ready_timeout_s, supervisor.check)
    except BaseException:
        supervisor.stop_all()
        raise
    return supervisor
