"""The one way benchmarks draw: matplotlib's Agg backend (no display), a row of panels, a PNG."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def figure(path: Path, panels: int, title: str) -> Iterator[Any]:
    """A figure of ``panels`` side-by-side axes (yields the tuple of axes); saved to ``path`` on exit."""
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: the benchmarks run without a display
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, panels, figsize=(6.0 * panels, 4.5), squeeze=False)
    try:
        yield tuple(axes[0])
        fig.suptitle(title)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
