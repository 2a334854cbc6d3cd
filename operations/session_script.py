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

from sectorflow.consumer.nodegroup.launch import mpiexec_environment

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
    # What mpiexec needs in its environment (consumer/nodegroup/launch.py), exported before it starts.
    mpiexec_environment: tuple[tuple[str, str], ...] = ()
    # With [slurm] image: what each rank's container mounts, as podman volumes (HOST:CONTAINER[:ro]).
    image_volumes: tuple[str, ...] = ()

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
        if slurm.image and slurm.launcher != "mpiexec":
            raise SectorflowError(f"[slurm] image {slurm.image!r} runs each rank in a container under the job's "
                                  f"mpiexec (image/mpi-rank): set [slurm] launcher = \"mpiexec\", not "
                                  f"{slurm.launcher!r}")
        config_path = Path(config.source).resolve()
        output = (output_dir or Path(config.nodegroup.output_dir)).resolve()
        return cls(slurm, config_path, log_dir.resolve(), output_dir.resolve() if output_dir else None,
                   mpiexec_environment=mpiexec_environment(config),
                   image_volumes=image_volumes(config_path, output, config) if slurm.image else ())


def image_volumes(config_path: Path, output: Path, config: Config) -> tuple[str, ...]:
    """What a rank's container mounts at the same paths: the configuration's directory and the
    [counting] maps' (read-only), the output directory (written)."""
    read_only = {config_path.parent}
    read_only |= {Path(path).resolve().parent for path in (config.counting.dark_reference, config.counting.gain)
                  if path}
    return (*(f"{d}:{d}:ro" for d in sorted(read_only - {output})), f"{output}:{output}")


def rank_wrapper() -> Path:
    """image/mpi-rank: in a checkout beside configs/, in an installed package beside its configs."""
    return CONFIG_DIR.parent / "image" / "mpi-rank"


def render_script(request: SessionRequest) -> str:
    """The batch script text for ``request``.

    Raises SectorflowError if the template is missing or does not render.
    """
    slurm = request.slurm
    template_path = CONFIG_DIR / slurm.template
    if not template_path.is_file():
        raise SectorflowError(f"Slurm template {template_path} not found (set [slurm] template)")
    mpiexec_env = dict(request.mpiexec_environment)
    if slurm.image:
        # Each rank in a container of its own; its sectorflow is the image's (docs/deployment.md, "Running
        # from the image").
        volumes = list(request.image_volumes)
        if request.key_dir is not None:
            volumes.append(f"{request.key_dir}:{request.key_dir}:ro")
        command = ["sh", str(rank_wrapper()), *(word for volume in volumes for word in ("-v", volume)), slurm.image,
                   "nodegroup", "--config", str(request.config_path)]
        mpiexec_env["PODMAN"] = slurm.podman
    else:
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
            mpiexec_environment=mpiexec_env,
            make_dirs=[volume.split(":")[0] for volume in request.image_volumes if not volume.endswith(":ro")],
        )
    except jinja2.TemplateError as error:
        raise SectorflowError(f"Slurm template {template_path}: {error}") from None
