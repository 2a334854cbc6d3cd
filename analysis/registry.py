"""The analysis plug-in point (analysis/SPEC.md): an analysis is declared once, as an
:class:`Analysis` with its :class:`Output` s, and registered in one place (``analysis/__init__.py``);
the counted file's writer and reader, the gather on MPI rank 0, the live subscriber, ``sectorflow
view``, the dashboard and its metrics iterate over what is registered.

An output is per probe position (an image of the scan, or a vector per position such as a radial
profile) or per scan (summed over the scan's frames, such as the summed pattern). Its values come
from one of two places, said by its analysis:

- ``nodegroup_kernel``: a per-frame kernel the NodeGroups' counting threads run in C++ as they
  count (a file of consumer/nodegroup/kernels/, registered in the C++ table by name,
  consumer/nodegroup/frame_kernel.hpp): its columns are the analysis's per-position outputs, by
  their ``live`` names, and ``settings`` are handed to it (analysis/builtin.py ``kernel_values``,
  ``kernel_choices``);
- ``from_events``: a Python function of counted frames (positions, offsets, events), run by each
  NodeGroup on its part of a scan when the scan is handed over, and by a live reader on each
  message's frames. An analysis of one's own needs only this.

A live reader takes a per-frame output from the images message's array named ``Output.live``
when there is one, else from ``from_events`` over the message's frames.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sectorflow.errors import SectorflowError

#: Where an output's values belong.
PER_POSITION = "position"
PER_SCAN = "scan"
#: matplotlib's diverging colour maps: an output drawn with one is signed, its colours centred on 0.
DIVERGING_COLOUR_MAPS = ("RdBu_r", "RdBu", "coolwarm", "bwr", "seismic")


@dataclass(frozen=True)
class Frames:
    """Counted frames: frame i is at flat probe position ``positions[i]`` and its electrons are the
    ascending flat pixel indices ``events[offsets[i]:offsets[i + 1]]``."""

    positions: np.ndarray
    offsets: np.ndarray
    events: np.ndarray

    def __len__(self) -> int:
        return len(self.positions)

    def frame_of_event(self) -> np.ndarray:
        """For each event, the index of its frame (what a vectorised kernel groups by)."""
        return np.repeat(np.arange(len(self.positions)), np.diff(np.asarray(self.offsets, dtype=np.int64)))


@dataclass(frozen=True)
class Context:
    """What an analysis's outputs and kernels depend on besides the frames."""

    frame_shape: tuple[int, int]
    centre_row: float
    centre_col: float
    detectors: tuple[str, ...] = ()
    """the virtual detectors' names, in the configured order"""
    detector_attrs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """each virtual detector's kind and geometry by name (a file's /virtual_images/<name> attributes)"""


@dataclass(frozen=True)
class Output:
    """One array an analysis makes, everywhere under the same name."""

    name: str
    """the key in every images dict, the dashboard's /images/<name>.png, a metric's label"""
    path: str
    """its HDF5 dataset in the counted file"""
    per: str
    """PER_POSITION: shape (scan rows, scan cols, *extra_shape), NaN where no frame was counted;
    PER_SCAN: shape extra_shape, summed over the counted frames"""
    dtype: str
    """its dtype in the file (per-position outputs are float: NaN marks a missing position)"""
    unit: str
    label: str
    """what a person reads: the dashboard's and view's title"""
    extra_shape: tuple[int, ...] = ()
    live: str | None = None
    """the live images message's array carrying it per frame; None: a reader computes it from the
    message's frames with the analysis's from_events"""
    log_scale: bool = False
    """drawn as log(1 + value) (the summed pattern)"""
    attrs: Mapping[str, Any] = field(default_factory=dict)
    """attributes of its dataset (a detector's geometry, an analysis's settings)"""
    colour_map: str = "gray"
    """matplotlib's colour map of its panel (view, the PNG)"""
    text: str = "shade"
    """how a terminal shows it: "shade" (an image in characters), "range" (its smallest and largest
    value), "total" (its sum), "vector" (its mean over the positions, element by element)"""

    @property
    def diverging(self) -> bool:
        """Signed values (the centre of mass): drawn on a diverging colour map whose middle is 0, so that
        the colour of 0 is the same in every scan and the scale runs from -m to +m, m the largest |value|."""
        return self.colour_map in DIVERGING_COLOUR_MAPS

    @property
    def image(self) -> bool:
        """A 2-D picture as it stands: an image of the scan, or a per-scan array of two axes."""
        return (self.per == PER_POSITION and not self.extra_shape) or \
            (self.per == PER_SCAN and len(self.extra_shape) == 2)

    def picture(self, values: np.ndarray) -> np.ndarray:
        """The output as a 2-D array to draw: itself, or a per-position vector's values with a row
        per probe position (scan-major) and a column per element."""
        values = np.asarray(values)
        return values if values.ndim == 2 else values.reshape(-1, values.shape[-1])


#: Values of frames: per PER_POSITION output, one row per frame (aligned with Frames.positions);
#: per PER_SCAN output, the sum over the frames.
Values = dict[str, np.ndarray]


@dataclass(frozen=True)
class Analysis:
    """One analysis of the counted frames."""

    name: str
    summary: str
    outputs: Callable[[Context], list[Output]]
    """its outputs for a detector and configuration"""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """its configuration (recorded as attributes of its outputs)"""
    nodegroup_kernel: str = ""
    """a per-frame kernel of the NodeGroups' C++ table (consumer/nodegroup/kernels/), whose columns are
    the per-position outputs' ``live`` names and which is made with ``settings`` (numbers); "" none"""
    from_events: Callable[[Frames, Context], Values] | None = None
    """its values computed from counted frames (None: only the NodeGroups' kernel makes them)"""
    built_in: bool = False
    """made whenever [analysis] virtual_images is on; any other only when [analysis] analyses lists it"""
    group_attrs: Callable[[Context], dict[str, dict[str, Any]]] | None = None
    """attributes of the file's groups its outputs are in, by group path"""

    def __post_init__(self) -> None:
        if not self.nodegroup_kernel and self.from_events is None:
            raise ValueError(f"analysis {self.name}: neither a NodeGroup kernel nor from_events")


_REGISTRY: dict[str, Analysis] = {}


def register(analysis: Analysis) -> Analysis:
    """Add ``analysis`` to the registry (once per name)."""
    if analysis.name in _REGISTRY:
        raise ValueError(f"analysis {analysis.name} is registered twice")
    _REGISTRY[analysis.name] = analysis
    return analysis


def registered() -> list[Analysis]:
    """Every registered analysis, in registration order (the order of the file, page and view)."""
    return list(_REGISTRY.values())


def chosen(names: Iterable[str], virtual_images: bool = True) -> list[Analysis]:
    """The analyses ``[analysis] analyses`` chose, after the built-in ones (with virtual images on).

    :raises SectorflowError: a name no analysis is registered under (one line, with "did you mean").
    """
    wanted = list(names)
    for name in wanted:
        if name not in _REGISTRY:
            close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else \
                f"; registered: {', '.join(a.name for a in registered() if not a.built_in)}"
            raise SectorflowError(f"[analysis] analyses: no analysis is named '{name}'{hint}")
    return [a for a in registered() if (a.built_in and virtual_images) or (not a.built_in and a.name in wanted)]


def outputs_of(analyses: Iterable[Analysis], context: Context) -> list[Output]:
    """Every output of ``analyses``, in order."""
    return [output for analysis in analyses for output in analysis.outputs(context)]


def by_path() -> dict[str, tuple[Analysis, Output]]:
    """Every fixed-path output a file may hold (with no detector in its context), by HDF5 path."""
    empty = Context(frame_shape=(1, 1), centre_row=0.0, centre_col=0.0)
    return {output.path: (analysis, output) for analysis in registered() for output in analysis.outputs(empty)}


def empty_values(output: Output, positions: int) -> np.ndarray:
    """What an output holds before any frame: NaN per position, zero per scan."""
    if output.per == PER_POSITION:
        return np.full((positions, *output.extra_shape), np.nan, dtype=np.float64)
    return np.zeros(output.extra_shape, dtype=np.float64 if np.dtype(output.dtype).kind == "f" else np.int64)


def compute(analyses: Iterable[Analysis], frames: Frames, context: Context, *, skip_kernels: bool) -> Values:
    """The values of every analysis that has from_events (with ``skip_kernels``: those whose
    NodeGroup kernel made them already are left out)."""
    values: Values = {}
    for analysis in analyses:
        if analysis.from_events is None or (skip_kernels and analysis.nodegroup_kernel):
            continue
        values.update(analysis.from_events(frames, context))
    return values


@dataclass(frozen=True)
class Plan:
    """The analyses a stack runs and the context they run in: what a NodeGroup computes, the gather
    writes and a live reader expects."""

    analyses: tuple[Analysis, ...]
    context: Context

    def outputs(self) -> list[Output]:
        return outputs_of(self.analyses, self.context)

    def with_detectors(self, names: Iterable[str]) -> Plan:
        """The same plan for the detectors a live message names (a reader's configuration may differ)."""
        names = tuple(names)
        if names == self.context.detectors:
            return self
        attrs = {n: self.context.detector_attrs.get(n, {}) for n in names}
        return Plan(self.analyses, Context(self.context.frame_shape, self.context.centre_row, self.context.centre_col,
                                           names, attrs))

    def group_attrs(self) -> dict[str, dict[str, Any]]:
        """Attributes of the file's groups that hold the outputs (the centre, the detectors' order)."""
        out: dict[str, dict[str, Any]] = {}
        for analysis in self.analyses:
            if analysis.group_attrs is not None:
                for group, attrs in analysis.group_attrs(self.context).items():
                    out.setdefault(group, {}).update(attrs)
        return out


def plan_of(config: Any, detector_attrs: Mapping[str, Mapping[str, Any]] | None = None,
            frame_shape: tuple[int, int] | None = None) -> Plan:
    """The plan of a configuration's ``[analysis]`` table: the built-in analyses with
    ``virtual_images`` on, then those ``analyses`` lists; the centre defaults to the frame's.

    :param detector_attrs: each virtual detector's kind and geometry (analysis/detectors.py);
        None: the detectors' names alone.
    :raises SectorflowError: ``analyses`` names an analysis not registered, or one made only by a
        NodeGroup kernel with ``virtual_images`` off (the kernels run with the virtual images).
    """
    a, d = config.analysis, config.detector
    rows, cols = frame_shape or (d.frame_rows, d.frame_cols)
    analyses = chosen(a.analyses, a.virtual_images)
    idle = [x.name for x in analyses if x.nodegroup_kernel and x.from_events is None and not a.virtual_images]
    if idle:
        raise SectorflowError(f"[analysis] analyses: {', '.join(idle)} runs in the NodeGroups' C++ kernels, which "
                              "run with the virtual images: set [analysis] virtual_images = true")
    names = tuple(v.name for v in a.virtual_detectors) if a.virtual_images else ()
    return Plan(tuple(analyses), Context(
        frame_shape=(rows, cols), centre_row=a.centre_row if a.centre_row >= 0 else rows / 2,
        centre_col=a.centre_col if a.centre_col >= 0 else cols / 2, detectors=names,
        detector_attrs={n: dict((detector_attrs or {}).get(n, {})) for n in names}))


__all__ = ["PER_POSITION", "PER_SCAN", "Analysis", "Context", "Frames", "Output", "Plan", "Results", "Values", "by_path", "chosen",
           "compute", "empty_values", "outputs_of", "plan_of", "register", "registered"]


@dataclass
class Results:
    """A scan's outputs, ready for its file: per-position outputs (positions, *extra_shape), NaN where
    no frame was counted, per-scan outputs summed."""

    plan: Plan
    values: Values

    def filled(self, positions: int) -> list[tuple[Output, np.ndarray]]:
        """Every output of the plan with its values (an output no frame made: NaN, or zero)."""
        return [(output, self.values[output.name] if output.name in self.values else empty_values(output, positions))
                for output in self.plan.outputs()]
