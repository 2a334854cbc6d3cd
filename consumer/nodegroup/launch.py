"""Launching a configuration's NodeGroup ranks with ``mpiexec``: what its environment must hold.

``sectorflow up`` (orchestration/stack.py) starts them on this machine, a Slurm streaming session's
script (operations/session_script.py) on the job's nodes; both export the same environment.
"""

from __future__ import annotations

from sectorflow.configs import Config


def mpiexec_environment(config: Config) -> tuple[tuple[str, str], ...]:
    """What mpiexec of ``config``'s NodeGroups needs in its environment: the port range of hydra's
    control socket (``[nodegroup] mpiexec_port_min``, why there)."""
    return (("MPIEXEC_PORT_RANGE", config.nodegroup.mpiexec_port_range),)


__all__ = ["mpiexec_environment"]
