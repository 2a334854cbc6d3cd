"""The ``[analysis]`` virtual detectors' geometry: the detectors on the detector's frame as the
NodeGroup's C++ type (:func:`detectors_from`), a mask detector's pixels (:func:`load_mask`) and
each detector's kind and geometry as a file's ``/virtual_images`` attributes and the dashboard
draw them (:func:`detector_attrs`). The NodeGroups count with them; the dashboard, the benchmarks
and the tests read the same geometry here, with no NodeGroup service in sight.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sectorflow._core.nodegroup import VirtualDetector, VirtualDetectors
from sectorflow.errors import SectorflowError


def detectors_from(config: Any) -> VirtualDetectors | None:
    """The ``[analysis]`` virtual detectors of ``config`` (a sectorflow.configs.Config) on the
    detector's frame (None: virtual images off): a detector's centre defaults to [analysis]'s, whose
    default is the frame's centre.

    :raises SectorflowError: a mask file that cannot be read or is not of the frame's shape.
    """
    a, d = config.analysis, config.detector
    if not a.virtual_images:
        return None
    centre_row = a.centre_row if a.centre_row >= 0 else d.frame_rows / 2
    centre_col = a.centre_col if a.centre_col >= 0 else d.frame_cols / 2
    return VirtualDetectors(
        centre_row=centre_row, centre_col=centre_col,
        detectors=[VirtualDetector(
            name=v.name, kind=v.kind, centre_row=v.centre_row if v.centre_row >= 0 else centre_row,
            centre_col=v.centre_col if v.centre_col >= 0 else centre_col, radius=v.radius, inner=v.inner,
            outer=v.outer, row0=v.row0, col0=v.col0, rows=v.rows, cols=v.cols,
            **({"mask": load_mask(v.name, v.mask, (d.frame_rows, d.frame_cols)), "mask_file": v.mask}
               if v.kind == "mask" else {})) for v in a.virtual_detectors],
    )


def load_mask(name: str, path: str, shape: tuple[int, int]) -> np.ndarray:
    """A mask detector's pixels: its .npy file, of the frame's shape, as 0/1 bytes."""
    try:
        values = np.load(path, allow_pickle=False)  # a pickle could run code: a mask is numbers
    except (OSError, ValueError) as error:
        raise SectorflowError(f"[analysis] virtual detector '{name}': cannot read mask {path}: {error}") from None
    if values.shape != shape or values.dtype.kind not in "biuf":
        raise SectorflowError(f"[analysis] virtual detector '{name}': mask {path} is {values.dtype} "
                              f"{' x '.join(map(str, values.shape))}, expected numbers of the {shape[0]} x {shape[1]} "
                              "frame")
    return (values != 0).astype(np.uint8).reshape(-1)


#: Each kind's geometry, as a file's /virtual_images/<name> attributes and the dashboard draw it.
_GEOMETRY = {"disk": ("centre_row", "centre_col", "radius"),
             "annulus": ("centre_row", "centre_col", "inner", "outer"),
             "rectangle": ("row0", "col0", "rows", "cols"),
             "mask": ("mask_file", "pixels")}


def detector_attrs(detectors: VirtualDetectors | None) -> dict[str, Any]:
    """The virtual detectors as the attributes of a file's /virtual_images ({} without): the centre
    of mass's centre, and under "detectors" each detector's kind and geometry by name, in order."""
    if detectors is None:
        return {}
    return {"centre_row": detectors.centre_row, "centre_col": detectors.centre_col,
            "detectors": {d.name: {"kind": d.kind, **{key: getattr(d, key) for key in _GEOMETRY[d.kind]}}
                          for d in detectors.detectors}}


__all__ = ["detector_attrs", "detectors_from", "load_mask"]
