"""What the benchmarks add to the one Supervisor: their own programs report results as one JSON
object per stdout line (their stderr goes to the log file), read with :func:`read_json`.

A run's processes live in a ``with Supervisor(log_dir, STOP_TIMEOUT_S)`` block, which stops
whatever still runs on the way out, normally or by an exception.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from sectorflow import heap
from sectorflow.errors import SectorflowError
from sectorflow.orchestration import ServiceSpec, Supervisor

STOP_TIMEOUT_S = 10.0


def start_reporting(processes: Supervisor, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` as ``name``, its stdout kept for ``read_json``, with the services' heap
    settings (sectorflow/heap.py), so that it is compared with them like for like."""
    return processes.start(ServiceSpec(name, tuple(argv)), heap.environment(), capture_stdout=True)


def read_json(processes: Supervisor, name: str, timeout_s: float) -> dict[str, Any]:
    """The next JSON line ``name`` prints, within ``timeout_s``.

    Raises SectorflowError if it exits first, prints something else or stays silent too long.
    """
    line = processes.read_line(name, timeout_s)
    try:
        return json.loads(line)
    except ValueError:
        raise SectorflowError(f"{name} printed {line.strip()!r}, not a JSON line") from None
