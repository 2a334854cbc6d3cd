"""Command lines of sectorflow that the tests and netlab run as a user would."""

from __future__ import annotations

import sys
from pathlib import Path


def acquire_command(config_path: Path, scan: int, shape: str, rate_hz: float, timeout_s: float,
                    *extra: str) -> list[str]:
    """``sectorflow acquire --wait`` of one scan: it ends when the scan is accounted and prints the
    account line (counted, spilled, missing) the fault tests read."""
    return [sys.executable, "-m", "sectorflow", "acquire", "--config", str(config_path), "--scan-number", str(scan),
            "--scan-shape", shape, "--rate", str(rate_hz), "--wait", "--timeout", str(timeout_s), *extra]
