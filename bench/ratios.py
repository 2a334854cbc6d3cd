"""The arithmetic every benchmark reports with: ratios and medians that survive empty inputs."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, 0.0 when the denominator is 0 (a path that moved nothing)."""
    return numerator / denominator if denominator else 0.0


def median(values: Iterable[float]) -> float:
    """The median, 0.0 for no values."""
    values = list(values)
    return statistics.median(values) if values else 0.0


def per_gb(seconds: float, size_bytes: int) -> float:
    """Seconds (e.g. CPU seconds) per GB moved; 0.0 for nothing moved."""
    return seconds / (size_bytes / 1e9) if size_bytes else 0.0
