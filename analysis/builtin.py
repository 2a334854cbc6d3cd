"""The built-in analyses, made whenever ``[analysis] virtual_images`` is on: the virtual
detectors' images, the centre of mass and the summed diffraction pattern. Their per-frame work is
the NodeGroups' C++ kernels (consumer/nodegroup/virtual_images.hpp: one pass over a frame's events makes
all three); ``NODEGROUP_KERNELS`` reads each kernel's values off a NodeGroup's ``ScanResult``.
Their file paths are stempy-era sectorflow's (consumer/counting/counted_file.py's layout)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .registry import PER_POSITION, PER_SCAN, Analysis, Context, Frames, Output, Values, register

#: The group of the file the built-in outputs are in.
GROUP = "/virtual_images"


def _detector_outputs(context: Context) -> list[Output]:
    return [Output(name=name, path=f"{GROUP}/{name}", per=PER_POSITION, dtype="float32", unit="electrons",
                   label=f"virtual {name.replace('_', ' ')}", live=name, attrs=dict(context.detector_attrs.get(name, {})))
            for name in context.detectors]


def _com_outputs(context: Context) -> list[Output]:
    return [Output(name=f"com_{axis}", path=f"{GROUP}/com_{axis}", per=PER_POSITION, dtype="float32", unit="px",
                   label=f"centre of mass {axis}", live=f"com_{axis}", colour_map="RdBu_r", text="range") for axis in ("x", "y")]


def _pattern_outputs(context: Context) -> list[Output]:
    return [Output(name="diffraction", path=f"{GROUP}/diffraction", per=PER_SCAN, dtype="uint64",
                   unit="electrons, log scale", label="summed diffraction pattern", extra_shape=context.frame_shape,
                   log_scale=True, colour_map="magma", text="total")]


def summed_pattern(frames: Frames, context: Context) -> Values:
    """Electrons per detector pixel over the frames."""
    pixels = context.frame_shape[0] * context.frame_shape[1]
    events = np.asarray(frames.events, dtype=np.int64)
    return {"diffraction": np.bincount(events, minlength=pixels)[:pixels].reshape(context.frame_shape)}


VIRTUAL_DETECTORS = register(Analysis(
    name="virtual_detectors", summary="electrons in each [[analysis.virtual_detectors]] per probe position",
    outputs=_detector_outputs, nodegroup_kernel="virtual_detectors", built_in=True,
    group_attrs=lambda context: {GROUP: {"detectors": list(context.detectors)}}))
CENTRE_OF_MASS = register(Analysis(
    name="centre_of_mass", summary="centre of mass of a frame's electrons minus the pattern centre",
    outputs=_com_outputs, nodegroup_kernel="centre_of_mass", built_in=True,
    group_attrs=lambda context: {GROUP: {"centre_row": context.centre_row, "centre_col": context.centre_col}}))
SUMMED_PATTERN = register(Analysis(
    name="summed_pattern", summary="electrons per detector pixel summed over the scan",
    outputs=_pattern_outputs, nodegroup_kernel="summed_pattern", from_events=summed_pattern, built_in=True))


#: The NodeGroups' per-frame C++ kernels by name, and how their values are read off a ``ScanResult``
#: (sectorflow._core.nodegroup): per-position outputs one value per counted frame, the summed pattern
#: summed over them.
NODEGROUP_KERNELS: dict[str, Callable[[Any, Context], Values]] = {
    "virtual_detectors": lambda result, _context: {name: np.array(values) for name, values in result.images.items()},
    "centre_of_mass": lambda result, _context: {"com_x": np.array(result.com_x), "com_y": np.array(result.com_y)},
    "summed_pattern": lambda result, context: {
        "diffraction": np.array(result.diffraction, dtype=np.uint64).reshape(context.frame_shape)},
}
