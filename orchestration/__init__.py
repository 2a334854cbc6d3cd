"""Running sectorflow's services: the supervised local stack (``sectorflow up``/``down``) and the
one-command demo (``sectorflow demo``) with its summary and pictures. Streaming sessions of
NodeGroups as Slurm jobs (``sectorflow session``) are the operator's: sectorflow.operations."""

from .stack import stack_services
from .supervisor import RunningService, ServiceSpec, Supervisor, load_running, stop_services

__all__ = [
    "RunningService",
    "ServiceSpec",
    "Supervisor",
    "load_running",
    "stack_services",
    "stop_services",
]
