"""A live view for a person: as text for a terminal (each image shaded with characters, downsampled
to fit), or as a figure of a panel per image with colour bars (a window, a PNG): each virtual
detector's image, as the scan carries them, the centre of mass and the summed pattern."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .subscriber import CENTRE_OF_MASS, LiveView

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


def detector_names(view: LiveView) -> list[str]:
    """The view's virtual detectors' images, in the order the scan carries them."""
    return [name for name in view.images if name not in CENTRE_OF_MASS]


def title(name: str) -> str:
    """A detector's name as words: bright_field is "bright field"."""
    return name.replace("_", " ")


def render_text(view: LiveView) -> str:
    """The view's detector images, two side by side, and a line of numbers."""
    rows, cols = view.scan_shape
    total = rows * cols
    lines = [f"scan {view.scan}: {view.positions_counted} of {total} positions counted"
             f"{' (complete)' if view.complete else ''}"
             f"{f'; {view.refused} live message(s) refused' if view.refused else ''}"]
    names = detector_names(view)
    for left, right in zip(names[::2], [*names[1::2], None]):
        if right is None:
            lines.extend([title(left), *shade(view.images[left])])
        else:
            lines.extend(side_by_side(view.images[left], view.images[right], title(left), title(right)))
    com = np.hypot(view.images["com_x"], view.images["com_y"])
    if np.isfinite(com).any():
        lines.append(f"centre of mass: mean |shift| {np.nanmean(com):.2f} px, largest {np.nanmax(com):.2f} px; "
                     f"{int(view.diffraction.sum())} electrons in the summed pattern")
    return "\n".join(lines)


#: The centre of mass's panels: the view's image, its title, its colour map.
COM_PANELS = (("com_x", "centre of mass x (px)", "RdBu_r"), ("com_y", "centre of mass y (px)", "RdBu_r"))


def panels(view: LiveView) -> list[tuple[str, str, str]]:
    """The figure's image panels (the summed pattern comes after): each detector's, then the centre of mass."""
    return [*((name, f"{title(name)} (electrons)", "gray") for name in detector_names(view)), *COM_PANELS]


def draw(figure: Any, view: LiveView, title: str) -> None:
    """Draw ``view`` on matplotlib's ``figure`` (cleared first): its images and the summed
    diffraction pattern (log scale), each with its colour bar."""
    figure.clear()
    shown = panels(view)
    axes = figure.subplots(1, len(shown) + 1)
    for ax, (name, label, cmap) in zip(axes, shown):
        figure.colorbar(ax.imshow(view.images[name], cmap=cmap), ax=ax, shrink=0.8)
        ax.set_title(label)
        ax.set_xlabel("scan x")
    pattern = axes[-1].imshow(np.log1p(view.diffraction.astype(np.float64)), cmap="magma")
    axes[-1].set_title("summed diffraction, log(1 + electrons)")
    figure.colorbar(pattern, ax=axes[-1], shrink=0.8)
    figure.suptitle(title)


def title_of(view: LiveView) -> str:
    rows, cols = view.scan_shape
    return (f"scan {view.scan}: {view.positions_counted} of {rows * cols} positions counted"
            f"{' (complete)' if view.complete else ''}")


def write_png(view: LiveView, path: Path, title: str | None = None) -> Path:
    """Save the figure of ``view`` as a PNG at ``path`` (matplotlib, the ``plot`` extra)."""
    from sectorflow.errors import require

    require("matplotlib", "plot", "to draw the PNG").use("Agg")
    plt = require("matplotlib.pyplot", "plot", "to draw the PNG")
    figure = plt.figure(figsize=(4.4 * (len(panels(view)) + 1), 4.6), constrained_layout=True)
    draw(figure, view, title or title_of(view))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path
