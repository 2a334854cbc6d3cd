"""A mask detector's outline on the summed pattern: the edges between its pixels and the others,
as one SVG path in detector pixels (pixel (r, c) spans [r, r+1) x [c, c+1)), each straight run of
edges one segment. A mask of scattered pixels has more edges than a page can draw at every update:
beyond MAX_SEGMENTS the outline is left out and the page says so."""

from __future__ import annotations

import numpy as np

#: Most segments of an outline sent with the page's state (about 16 bytes each, at every update).
MAX_SEGMENTS = 4000


def _runs(edges: np.ndarray) -> list[tuple[int, int, int]]:
    """(line, start, end) of each run of True along the second axis of ``edges``."""
    padded = np.zeros((edges.shape[0], edges.shape[1] + 2), dtype=np.int8)
    padded[:, 1:-1] = edges
    steps = np.diff(padded, axis=1)
    lines, starts = np.nonzero(steps == 1)
    _, ends = np.nonzero(steps == -1)
    return list(zip(lines.tolist(), starts.tolist(), ends.tolist()))


def mask_outline(mask: np.ndarray) -> str | None:
    """The SVG path of the outline of ``mask`` (2-D, nonzero inside); None beyond MAX_SEGMENTS."""
    inside = np.pad(np.asarray(mask) != 0, 1)
    across_rows = inside[1:, 1:-1] != inside[:-1, 1:-1]     # (rows + 1, cols): edge at y = r, x in [c, c+1)
    across_cols = inside[1:-1, 1:] != inside[1:-1, :-1]     # (rows, cols + 1): edge at x = c, y in [r, r+1)
    horizontal = _runs(across_rows)
    vertical = _runs(across_cols.T)
    if len(horizontal) + len(vertical) > MAX_SEGMENTS:
        return None
    return " ".join([*(f"M{c0} {r}H{c1}" for r, c0, c1 in horizontal),
                     *(f"M{c} {r0}V{r1}" for c, r0, r1 in vertical)])
