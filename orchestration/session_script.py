"""Render the batch script of a streaming session from the Jinja2 template in ``configs/``."""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import jinja2

from sectorflow.configs import CONFIG_DIR, Config, SlurmConfig
from sectorflow.errors import SectorflowError, UsageError

from .stack import mpiexec_environment

JOB_NAME = "sectorflow-session"
_WALLTIME = re.compile(r"^(\d+-)?\d{1,3}:\d{2}(:\d{2})?$")


@dataclass(frozen=True)
class SessionRequest:
    """What one submission asks for; command-line options override the configuration's [slurm]."""

    slurm: SlurmConfig
    config_path: Path
    log_dir: Path
    output_dir: Path | None = None
    # The session's private key directory ([security] on): named in the script, never its keys.
    key_dir: Path | None = None
    # What mpiexec needs in its environment (stack.mpiexec_environment), exported before it starts.
    mpiexec_environment: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_config(cls, config: Config, log_dir: Path, nodes: int | None = None, time: str | None = None,
                    output_dir: Path | None = None) -> "SessionRequest":
        slurm = config.slurm
        if nodes is not None:
            if nodes < 1:
                raise UsageError(f"--nodes {nodes}: a session needs at least one node")
            slurm = replace(slurm, nodes=nodes)
        if time is not None:
            slurm = replace(slurm, time=time)
        if not _WALLTIME.match(slurm.time):
            raise SectorflowError(f"walltime {slurm.time!r}: expected HH:MM, HH:MM:SS or D-HH:MM:SS")
        return cls(slurm, Path(config.source).resolve(), log_dir.resolve(),
                   output_dir.resolve() if output_dir else None, mpiexec_environment=mpiexec_environment(config))


def render_script(request: SessionRequest) -> str:
    """The batch script text for ``request``.

    Raises SectorflowError if the template is missing or does not render.
    """
    slurm = request.slurm
    template_path = CONFIG_DIR / slurm.template
    if not template_path.is_file():
        raise SectorflowError(f"Slurm template {template_path} not found (set [slurm] template)")
    command = [sys.executable, "-m", "sectorflow", "nodegroup", "--config", str(request.config_path)]
    if request.output_dir is not None:
        command += ["--output", str(request.output_dir)]
    if request.key_dir is not None:
        command += ["--key-dir", str(request.key_dir)]
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    environment.filters["quote"] = shlex.quote
    try:
        template = environment.from_string(template_path.read_text())
        return template.render(
            job_name=JOB_NAME, nodes=slurm.nodes, tasks_per_node=slurm.tasks_per_node, time=slurm.time,
            account=slurm.account, qos=slurm.qos, constraint=slurm.constraint, partition=slurm.partition,
            launcher=slurm.launcher, environment=slurm.environment, log_dir=str(request.log_dir),
            config=str(request.config_path), command=shlex.join(command),
            mpiexec_environment=dict(request.mpiexec_environment),
        )
    except jinja2.TemplateError as error:
        raise SectorflowError(f"Slurm template {template_path}: {error}") from None
