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

from .supervisor import ServiceSpec


def _sectorflow(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "sectorflow", *args)


def stack_services(config: Config, ranks: int, output_dir: Path | None = None,
                   with_nodegroups: bool = True) -> list[ServiceSpec]:
    """The services of ``config``'s pipeline on this machine.

    ``ranks`` MPI ranks of NodeGroups are started with ``mpiexec`` (none if ``with_nodegroups`` is
    false, e.g. when a Slurm session provides them). Raises SectorflowError if mpiexec is missing.
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
        services.append(ServiceSpec("nodegroups", (mpiexec, "-n", str(ranks), *_sectorflow(*nodegroup))))
    for receiver in range(config.n_receivers):
        services.append(ServiceSpec(f"producer-{receiver}",
                                    _sectorflow("producer", "--config", path, "--receiver", str(receiver))))
    return services
