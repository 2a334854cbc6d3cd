"""Images computed from a counted scan's electron events alone: the summed diffraction pattern and a
virtual bright field (for a file without the NodeGroups' analyses). Drawing them, and the analyses'
outputs, for a person is sectorflow.live.overview's."""

from __future__ import annotations

import numpy as np

from .counted_file import CountedScan


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
