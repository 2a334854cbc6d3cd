"""Pictures of a counted scan a person can look at: the outputs of the analyses the NodeGroups wrote
into the file (sectorflow.analysis), or for a file without them the virtual bright field and
summed pattern computed from the electron events."""

from __future__ import annotations

from pathlib import Path
import numpy as np

from .counted_file import CountedScan
from sectorflow.errors import require


def summed_diffraction(scan: CountedScan) -> np.ndarray:
    """Electrons per detector pixel over the whole scan, shape = frame shape."""
    rows, cols = scan.frame_shape
    counts = np.zeros(rows * cols, dtype=np.int64)
    for events in scan.events:
        if events is not None and len(events):
            np.add.at(counts, np.asarray(events, dtype=np.int64), 1)
    return counts.reshape(rows, cols)


def virtual_bright_field(scan: CountedScan, radius_px: float | None = None) -> np.ndarray:
    """Electrons inside a disk at the centre of mass of the summed pattern, per probe position.

    ``radius_px`` defaults to the radius holding 90% of all electrons, so the image follows the
    bright-field disk whatever its size.
    """
    rows, cols = scan.frame_shape
    pattern = summed_diffraction(scan)
    total = pattern.sum()
    yy, xx = np.indices((rows, cols))
    if total:
        cy, cx = (pattern * yy).sum() / total, (pattern * xx).sum() / total
    else:
        cy, cx = (rows - 1) / 2, (cols - 1) / 2
    distance = np.hypot(yy - cy, xx - cx).ravel()
    if radius_px is None:
        order = np.argsort(distance)
        cumulative = np.cumsum(pattern.ravel()[order])
        radius_px = float(distance[order][np.searchsorted(cumulative, 0.9 * total)]) if total else 0.0
    inside = distance <= radius_px
    image = np.array([np.count_nonzero(inside[np.asarray(e, dtype=np.int64)]) if e is not None and len(e) else 0
                      for e in scan.events], dtype=np.int64)
    scan_rows, scan_cols = scan.scan_shape
    return image.reshape(scan_rows, scan_cols)


def image_text(scan: CountedScan) -> list[str]:
    """The file's outputs as a terminal shows them (sectorflow.live.render: images shaded two side by
    side, a line for each other output); nothing for a file without virtual images."""
    from sectorflow.live.file_view import view_of_scan
    from sectorflow.live.render import render_text

    if not scan.images:
        return []
    return [f"  {line}" for line in render_text(view_of_scan(scan)).splitlines()[1:]]


def write_overview_png(scan: CountedScan, path: Path, title: str) -> Path:
    """Save the scan's virtual images (each detector's, centre of mass x and y) and the
    summed diffraction pattern (log scale); a file without virtual images: the bright field
    computed from its events beside the pattern."""
    require("matplotlib", "plot", "to draw the scan's PNG").use("Agg")
    plt = require("matplotlib.pyplot", "plot", "to draw the scan's PNG")
    if scan.images:
        from sectorflow.live.file_view import view_of_scan
        from sectorflow.live.render import write_png

        return write_png(view_of_scan(scan), path, title)

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 5), constrained_layout=True)
    image = left.imshow(virtual_bright_field(scan), cmap="gray")
    left.set_title("virtual bright field (electrons in the disk)")
    left.set_xlabel("scan x")
    left.set_ylabel("scan y")
    figure.colorbar(image, ax=left, shrink=0.8)
    pattern = right.imshow(np.log1p(summed_diffraction(scan)), cmap="magma")
    right.set_title("summed diffraction pattern, log(1 + electrons)")
    right.set_xlabel("detector column")
    right.set_ylabel("detector row")
    figure.colorbar(pattern, ax=right, shrink=0.8)
    figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
