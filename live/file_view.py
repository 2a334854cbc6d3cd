"""A finished scan's file as a LiveView: ``sectorflow view FILE`` shows it as it shows a running scan."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sectorflow.analysis import PER_POSITION
from sectorflow.consumer.counting import CountedScan, read_counted_scan
from sectorflow.errors import SectorflowError

from .subscriber import LiveView


def view_of_file(path: Path) -> LiveView:
    """The virtual images the NodeGroups wrote into the counted file at ``path``.

    Raises SectorflowError if it cannot be read or holds no virtual images ([analysis] virtual_images off).
    """
    scan = read_counted_scan(path)
    if not scan.images:
        raise SectorflowError(f"{path}: no virtual images in the file (written with [analysis] virtual_images = false)")
    return view_of_scan(scan)


def view_of_scan(scan: CountedScan) -> LiveView:
    """The virtual images of a counted scan read back (``scan.images`` must hold them)."""
    rows, cols = scan.scan_shape
    completeness = scan.metadata.get("completeness", {})
    per_position = {name for name, output in scan.outputs.items() if output.per == PER_POSITION}
    return LiveView(
        scan=int(scan.metadata.get("scan", {}).get("scan_number", -1)),
        scan_shape=(rows, cols),
        images={name: np.asarray(image, dtype=np.float64) for name, image in scan.images.items() if name in per_position},
        sums={name: np.asarray(values) for name, values in scan.images.items() if name not in per_position},
        positions_counted=rows * cols - len(scan.missing_positions),
        complete=bool(completeness.get("complete", False)),
        outputs=dict(scan.outputs),
        instrument=dict(scan.metadata.get("instrument", {})),
    )
