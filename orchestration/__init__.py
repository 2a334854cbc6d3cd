"""Running sectorflow's services: the supervised local stack (``sectorflow up``/``down``), the
one-command demo (``sectorflow demo``) with its summary and pictures, and streaming sessions of
NodeGroups as Slurm jobs (``sectorflow session``)."""

from .images import summed_diffraction, virtual_bright_field, write_overview_png
from .session_script import JOB_NAME, SessionRequest, render_script
from .slurm import SessionJob, cancel, list_sessions, submit
from .stack import stack_services
from .supervisor import RunningService, ServiceSpec, Supervisor, load_running, stop_services

__all__ = [
    "JOB_NAME",
    "RunningService",
    "ServiceSpec",
    "SessionJob",
    "SessionRequest",
    "Supervisor",
    "cancel",
    "list_sessions",
    "load_running",
    "render_script",
    "stack_services",
    "stop_services",
    "submit",
    "summed_diffraction",
    "virtual_bright_field",
    "write_overview_png",
]
