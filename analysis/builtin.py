"""The built-in analyses, made whenever ``[analysis] virtual_images`` is on: the virtual
detectors' images, the centre of mass and the summed diffraction pattern. Their per-frame work is
the NodeGroups' C++ kernels (consumer/nodegroup/kernels/virtual_detectors.cpp, centre_of_mass.cpp),
the summed pattern the per-scan sum the NodeGroups make beside them (virtual_images.hpp);
:func:`kernel_values` reads any kernel's values off a NodeGroup's ``ScanResult`` by column, and
:func:`kernel_choices` says which kernels a NodeGroup runs. Their file paths are stempy-era
sectorflow's (consumer/counting/counted_file.py's layout)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .registry import PER_POSITION, PER_SCAN, Analysis, Context, Frames, Output, Values, register

#: The group of the file the built-in outputs are in.
GROUP = "/virtual_images"

#: The summed pattern's ``nodegroup_kernel``: the per-scan sum every NodeGroup that images makes
#: beside the per-frame kernels (VirtualImages::diffraction), not an entry of their C++ table.
SUMMED_PATTERN_KERNEL = "summed_pattern"


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
    outputs=_pattern_outputs, nodegroup_kernel=SUMMED_PATTERN_KERNEL, from_events=summed_pattern, built_in=True))


def kernel_choices(analyses: Iterable[Analysis]) -> list[tuple[str, dict[str, float]]]:
    """The per-frame C++ kernels ``analyses`` name, in order, each with its analysis's settings: what a
    NodeGroup is told to run (``NodeGroupSettings.kernels``, consumer/nodegroup/frame_kernel.hpp)."""
    return [(a.nodegroup_kernel, {key: float(value) for key, value in a.settings.items()}) for a in analyses
            if a.nodegroup_kernel and a.nodegroup_kernel != SUMMED_PATTERN_KERNEL]


def kernel_columns(analyses: Iterable[Analysis], context: Context) -> list[str]:
    """The columns the per-frame kernels of ``analyses`` make: each per-position output's ``live`` name
    (a kernel's column is its output's name in the live stream)."""
    return [o.live for a in analyses if a.nodegroup_kernel and a.nodegroup_kernel != SUMMED_PATTERN_KERNEL
            for o in a.outputs(context) if o.per == PER_POSITION and o.live is not None]


def kernel_values(analysis: Analysis, result: Any, context: Context) -> Values:
    """``analysis``'s values as its NodeGroup kernel made them for a ``ScanResult``'s frames
    (sectorflow._core.nodegroup): a per-position output is the kernel's column its ``live`` names, one
    value per frame; the summed pattern is the result's, summed over them."""
    if analysis.nodegroup_kernel == SUMMED_PATTERN_KERNEL:
        return {"diffraction": np.array(result.diffraction, dtype=np.uint64).reshape(context.frame_shape)}
    columns = result.images
    return {o.name: np.array(columns[o.live]) for o in analysis.outputs(context)
            if o.per == PER_POSITION and o.live is not None}
