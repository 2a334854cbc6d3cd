"""The whole pipeline on one machine: supervised local services (``sectorflow up``/``down``) and
the one-command demo (``sectorflow demo``), with its summary and pictures."""

from .images import summed_diffraction, virtual_bright_field, write_overview_png
from .stack import stack_services
from .supervisor import RunningService, ServiceSpec, Supervisor, load_running, stop_services

__all__ = [
    "RunningService",
    "ServiceSpec",
    "Supervisor",
    "load_running",
    "stack_services",
    "stop_services",
    "summed_diffraction",
    "virtual_bright_field",
    "write_overview_png",
]
