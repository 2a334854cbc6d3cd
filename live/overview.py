"""Pictures of a counted scan a person can look at: the outputs of the analyses the NodeGroups wrote
into the file (sectorflow.analysis), drawn as the live view draws them, or for a file without them
the virtual bright field and summed pattern computed from the electron events (consumer/counting/images.py).
Here, in live/, because they draw with live's renderers: counting knows nothing of the live view."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sectorflow.consumer.counting import CountedScan
from sectorflow.consumer.counting.images import summed_diffraction, virtual_bright_field
from sectorflow.errors import require

from .file_view import view_of_scan
from .render import render_text, write_png


def image_text(scan: CountedScan) -> list[str]:
    """The file's outputs as a terminal shows them (sectorflow.live.render: images shaded two side by
    side, a line for each other output); nothing for a file without virtual images."""
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
