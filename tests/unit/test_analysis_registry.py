"""The analysis registry (analysis/SPEC.md): the built-in analyses' outputs are declared where the
file, the live reader, view and the dashboard look them up, and an analysis computed from events
gives per frame what numpy gives."""

from __future__ import annotations

import numpy as np
import pytest

from sectorflow.analysis import PER_POSITION, PER_SCAN, Analysis, Context, Frames, chosen, outputs_of, registered
from sectorflow.errors import SectorflowError

CONTEXT = Context(frame_shape=(8, 8), centre_row=4.0, centre_col=4.0, detectors=("bright_field", "probe"))


def test_the_built_in_outputs_keep_the_files_paths_in_the_registrys_order() -> None:
    built_in = outputs_of([a for a in registered() if a.built_in], CONTEXT)
    assert [(o.name, o.path, o.per) for o in built_in] == [
        ("bright_field", "/virtual_images/bright_field", PER_POSITION),
        ("probe", "/virtual_images/probe", PER_POSITION),
        ("com_x", "/virtual_images/com_x", PER_POSITION), ("com_y", "/virtual_images/com_y", PER_POSITION),
        ("diffraction", "/virtual_images/diffraction", PER_SCAN)]
    assert built_in[-1].extra_shape == (8, 8) and built_in[-1].log_scale


def test_the_summed_pattern_from_events_is_numpys() -> None:
    frames = Frames(np.array([3, 0]), np.array([0, 3, 4]), np.array([1, 9, 63, 9], np.uint32))
    summed = next(a for a in registered() if a.name == "summed_pattern").from_events(frames, CONTEXT)["diffraction"]
    expected = np.zeros(64, np.int64)
    np.add.at(expected, [1, 9, 63, 9], 1)
    np.testing.assert_array_equal(summed.ravel(), expected)


def test_an_analysis_needs_a_kernel_or_events_and_an_unknown_name_is_refused() -> None:
    with pytest.raises(ValueError, match="neither a NodeGroup kernel nor from_events"):
        Analysis(name="nothing", summary="", outputs=lambda _c: [])
    with pytest.raises(SectorflowError, match="no analysis is named 'summed'; did you mean 'summed_pattern'"):
        chosen(["summed"])
    assert [a.name for a in chosen([], virtual_images=False)] == []
