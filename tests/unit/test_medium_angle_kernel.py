"""The medium-angle annulus's C++ kernel (consumer/nodegroup/kernels/medium_angle.cpp) through the
bindings, with the settings its analysis (analysis/medium_angle.py) hands it, against LiberTEM's ring
mask on the same events: the field's pixel convention, pixels on both circles included."""

from __future__ import annotations

import numpy as np
import pytest
from libertem import masks

from sectorflow.analysis import Context, kernel_choices, kernel_columns, registered
from sectorflow.analysis.medium_angle import SETTINGS
from sectorflow.consumer.nodegroup import KernelChoice, NodeGroupError, VirtualDetectors, frame_kernels, virtual_images

# Whole-pixel radii from a whole-pixel centre lie exactly on pixels (66 = |(66, 0)|, 90 = |(54, 72)|):
# the comparison checks which side of each edge they fall on.
ROWS, COLS = 200, 190
CENTRE_ROW, CENTRE_COL = 100.0, 95.0


def chosen() -> list[KernelChoice]:
    analysis = next(a for a in registered() if a.name == "medium_angle")
    return [KernelChoice(name, settings) for name, settings in kernel_choices([analysis])]


def test_the_annulus_equals_libertems_ring_frame_by_frame() -> None:
    ring = masks.ring(CENTRE_COL, CENTRE_ROW, COLS, ROWS, SETTINGS["outer_px"], SETTINGS["inner_px"]).reshape(-1)
    rng = np.random.default_rng(11)
    # Frames whose electrons crowd the ring and its edges, and one without electrons.
    edge = np.flatnonzero(ring | np.roll(ring, 1) | np.roll(ring, -COLS))
    frames = [np.unique(np.concatenate([rng.choice(edge, rng.integers(0, 80)),
                                        rng.integers(0, ROWS * COLS, rng.integers(0, 40))])).astype(np.uint32)
              for _ in range(150)]
    frames[5] = np.zeros(0, np.uint32)
    events = np.concatenate(frames)
    offsets = np.concatenate([[0], np.cumsum([len(f) for f in frames])]).astype(np.uint64)
    detectors = VirtualDetectors(centre_row=CENTRE_ROW, centre_col=CENTRE_COL, detectors=[])
    images = virtual_images(detectors, ROWS, COLS, events, offsets, kernels=chosen())
    assert list(images) == ["medium_angle", "diffraction"]
    expected = np.array([np.count_nonzero(ring[f]) for f in frames])
    assert 0 < expected.sum() < len(events)  # electrons inside and outside: the comparison means something
    np.testing.assert_array_equal(images["medium_angle"], expected)
    assert images["medium_angle"].dtype == np.float32 and images["medium_angle"][5] == 0


def test_the_analysis_hands_its_radii_to_the_kernel_and_reads_its_column() -> None:
    (choice,) = chosen()
    assert choice.name == "medium_angle" in frame_kernels() and choice.settings == SETTINGS
    analysis = next(a for a in registered() if a.name == "medium_angle")
    assert kernel_columns([analysis], Context(frame_shape=(8, 8), centre_row=4.0, centre_col=4.0)) == ["medium_angle"]


@pytest.mark.parametrize(("settings", "message"), [
    ({"inner_px": 66.0}, "NodeGroup kernel 'medium_angle': its analysis gives no setting 'outer_px'"),
    ({"inner_px": 9.0, "outer_px": 9.0}, "needs finite radii 0 <= inner_px < outer_px"),
])
def test_settings_the_kernel_cannot_work_with_are_refused_naming_it(settings: dict[str, float], message: str) -> None:
    detectors = VirtualDetectors(centre_row=1.0, centre_col=1.0, detectors=[])
    with pytest.raises(NodeGroupError, match=message):
        virtual_images(detectors, 4, 4, np.zeros(0, np.uint32), np.zeros(1, np.uint64),
                       kernels=[KernelChoice("medium_angle", settings)])


def test_a_kernel_nobody_registered_is_refused_naming_the_registered_ones() -> None:
    detectors = VirtualDetectors(centre_row=1.0, centre_col=1.0, detectors=[])
    with pytest.raises(NodeGroupError, match="no NodeGroup kernel is named 'annulus'; registered: centre_of_mass, "
                                             "medium_angle, virtual_detectors"):
        virtual_images(detectors, 4, 4, np.zeros(0, np.uint32), np.zeros(1, np.uint64), kernels=[KernelChoice("annulus")])
