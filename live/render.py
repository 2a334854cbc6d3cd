"""A live view for a person: as text for a terminal (each image shaded with characters, downsampled
to fit), or as a figure of a panel per output with colour bars (a window, a PNG): every output of
the analyses the scan carries (sectorflow.analysis), in the registry's order, each as its
declaration says (its label, unit, colour map, and how a terminal shows it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sectorflow.analysis import PER_POSITION, Output
from sectorflow.protocol.scan_instrument import describe

from .subscriber import LiveView

#: From empty to full.
SHADES = " .:-=+*#%@"
#: Characters per image row, at most.
MAX_WIDTH = 48
#: Elements of a per-position vector a terminal line shows, at most.
VECTOR_SHOWN = 12


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


def outputs(view: LiveView) -> list[tuple[Output, np.ndarray]]:
    """Every output of the view with its values, per-position ones first, in the registry's order."""
    shown = [(view.outputs[name], values) for name, values in view.images.items() if name in view.outputs]
    return shown + [(view.outputs[name], values) for name, values in view.sums.items() if name in view.outputs]


def detector_names(view: LiveView) -> list[str]:
    """The view's shaded images (each virtual detector's, and any analysis's image shown so)."""
    return [o.name for o, _ in outputs(view) if o.text == "shade" and o.per == PER_POSITION and o.image]


def title(name: str) -> str:
    """A detector's name as words: bright_field is "bright field"."""
    return name.replace("_", " ")


def _line(output: Output, values: np.ndarray) -> str | None:
    """The one line a terminal shows of an output that is not shaded; None if nothing is counted."""
    values = np.asarray(values, dtype=np.float64)
    if not np.isfinite(values).any():
        return None
    if output.text == "range":
        return f"{output.label}: from {np.nanmin(values):+.2f} to {np.nanmax(values):+.2f} {output.unit}"
    if output.text == "total":
        return f"{output.label}: {int(np.nansum(values))} {output.unit.split(',')[0]} in all"
    if output.text == "vector":
        mean = np.nanmean(values.reshape(-1, values.shape[-1]), axis=0)
        shown = " ".join(f"{v:.2f}" for v in mean[:VECTOR_SHOWN])
        return f"{output.label}, mean over positions ({output.unit}): {shown}{' ...' if len(mean) > VECTOR_SHOWN else ''}"
    return None


def render_text(view: LiveView) -> str:
    """The view's shaded images, two side by side, and a line per other output."""
    rows, cols = view.scan_shape
    total = rows * cols
    lines = [f"scan {view.scan}: {view.positions_counted} of {total} positions counted"
             f"{' (complete)' if view.complete else ''}"
             f"{f'; {view.refused} live message(s) refused' if view.refused else ''}"]
    if view.instrument:
        lines.append(f"instrument: {describe(view.instrument)}")
    names = detector_names(view)
    for left, right in zip(names[::2], [*names[1::2], None]):
        left_title = view.outputs[left].label
        if right is None:
            lines.extend([left_title, *shade(view.images[left])])
        else:
            lines.extend(side_by_side(view.images[left], view.images[right], left_title, view.outputs[right].label))
    for output, values in outputs(view):
        if output.name not in names and (line := _line(output, values)) is not None:
            lines.append(line)
    return "\n".join(lines)


def panels(view: LiveView) -> list[tuple[str, str, str]]:
    """The figure's panels: each output's name, title and colour map."""
    return [(o.name, f"{o.label}{', log(1 + value)' if o.log_scale else ''} ({o.unit.split(',')[0]})", o.colour_map)
            for o, _ in outputs(view)]


def draw(figure: Any, view: LiveView, title: str) -> None:
    """Draw ``view`` on matplotlib's ``figure`` (cleared first): a panel per output, each with its colour bar."""
    figure.clear()
    shown = outputs(view)
    axes = np.atleast_1d(figure.subplots(1, max(1, len(shown))))
    for ax, (output, values) in zip(axes, shown):
        picture = output.picture(np.asarray(values, dtype=np.float64))
        if output.log_scale:
            picture = np.log1p(picture)
        # A signed output (the centre of mass) centred on 0: the colour of 0 is the same in every scan.
        largest = float(np.nanmax(np.abs(picture))) if output.diverging and np.isfinite(picture).any() else None
        limits = {"vmin": -largest, "vmax": largest} if largest else {}
        figure.colorbar(ax.imshow(picture, cmap=output.colour_map, aspect="auto" if not output.image else None,
                                  **limits), ax=ax, shrink=0.8)
        ax.set_title(f"{output.label}{', log(1 + value)' if output.log_scale else ''}")
        ax.set_xlabel("scan x" if output.image and output.per == PER_POSITION else
                      "element" if output.per == PER_POSITION else "detector column")
    figure.suptitle(title)


def title_of(view: LiveView) -> str:
    rows, cols = view.scan_shape
    return (f"scan {view.scan}: {view.positions_counted} of {rows * cols} positions counted"
            f"{' (complete)' if view.complete else ''}{f'; {describe(view.instrument)}' if view.instrument else ''}")


def write_png(view: LiveView, path: Path, title: str | None = None) -> Path:
    """Save the figure of ``view`` as a PNG at ``path`` (matplotlib, the ``plot`` extra)."""
    from sectorflow.errors import require

    require("matplotlib", "plot", "to draw the PNG").use("Agg")
    plt = require("matplotlib.pyplot", "plot", "to draw the PNG")
    figure = plt.figure(figsize=(4.4 * max(1, len(panels(view))), 4.6), constrained_layout=True)
    draw(figure, view, title or title_of(view))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path
