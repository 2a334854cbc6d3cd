"""Analyses of the counted frames, declared once and registered here (analysis/SPEC.md): importing
this package registers each of the modules below, in the order the file, the page and ``view``
show them."""

from . import builtin, medium_angle, radial_profile  # noqa: F401 - registers them
from .builtin import kernel_choices, kernel_columns, kernel_values
from .detectors import detector_attrs, detectors_from, load_mask
from .registry import (
    PER_POSITION,
    PER_SCAN,
    Analysis,
    Context,
    Frames,
    Output,
    Plan,
    Results,
    Values,
    chosen,
    compute,
    empty_values,
    outputs_of,
    plan_of,
    register,
    registered,
)

__all__ = ["PER_POSITION", "PER_SCAN", "Analysis", "Context", "Frames", "Output", "Plan",
           "Results", "Values", "chosen", "compute", "detector_attrs", "detectors_from", "empty_values", "kernel_choices",
           "kernel_columns", "kernel_values", "load_mask", "outputs_of", "plan_of", "register", "registered"]
