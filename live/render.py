"""A live view as text, for a terminal: each image shaded with characters, downsampled to fit."""

from __future__ import annotations

import numpy as np

from .subscriber import LiveView

#: From empty to full.
SHADES = " .:-=+*#%@"
#: Characters per image row, at most.
MAX_WIDTH = 48


def shade(image: np.ndarray, width: int = MAX_WIDTH) -> list[str]:
    """Rows of characters for ``image`` (NaN: blank), scaled between its smallest and largest value;
    two scan rows per text row, as a character is about twice as tall as wide."""
    rows, cols = image.shape
    step = max(1, -(-cols // width))
    values = image[:: 2 * step, ::step]
    finite = np.isfinite(values)
    if not finite.any():
        return [" " * values.shape[1]] * values.shape[0]
    low, high = np.nanmin(values), np.nanmax(values)
    scaled = np.zeros(values.shape) if high == low else (values - low) / (high - low)
    index = np.clip((scaled * (len(SHADES) - 1)).round(), 0, len(SHADES) - 1)
    return ["".join(SHADES[int(i)] if ok else " " for i, ok in zip(row, ok_row))
            for row, ok_row in zip(index, finite)]


def side_by_side(left_image: np.ndarray, right_image: np.ndarray, left_title: str, right_title: str) -> list[str]:
    """Two images shaded next to each other, each under its title."""
    left, right = shade(left_image), shade(right_image)
    width = len(left[0]) if left else 0
    return [f"{left_title.ljust(width)}  {right_title}", *(f"{a.ljust(width)}  {b}" for a, b in zip(left, right))]


def render_text(view: LiveView) -> str:
    """The view's bright-field and dark-field images side by side, and a line of numbers."""
    rows, cols = view.scan_shape
    total = rows * cols
    lines = [f"scan {view.scan}: {view.positions_counted} of {total} positions counted"
             f"{' (complete)' if view.complete else ''}"
             f"{f'; {view.refused} live message(s) refused' if view.refused else ''}",
             *side_by_side(view.images["bright_field"], view.images["dark_field"], "bright field", "dark field")]
    com = np.hypot(view.images["com_x"], view.images["com_y"])
    if np.isfinite(com).any():
        lines.append(f"centre of mass: mean |shift| {np.nanmean(com):.2f} px, largest {np.nanmax(com):.2f} px; "
                     f"{int(view.diffraction.sum())} electrons in the summed pattern")
    return "\n".join(lines)
