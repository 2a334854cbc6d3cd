"""The NodeGroup's virtual images (virtual_images.hpp, through sectorflow.consumer.nodegroup.virtual_images)
against the same detectors written in numpy."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
from libertem import masks

from sectorflow.analysis import detectors_from
from sectorflow.configs import DEFAULT_CONFIG, config_from_dict, load_config
from sectorflow.errors import SectorflowError
from sectorflow.consumer.nodegroup import NodeGroupError, VirtualDetector, VirtualDetectors, virtual_images

ROWS, COLS = 48, 40


def inside(d: VirtualDetector, events: np.ndarray) -> np.ndarray:
    """Whether each event's pixel lies in ``d``: a rectangle from its definition, a disk and an
    annulus by LiberTEM's own masks (the field's pixel convention, analysis/SPEC.md)."""
    rows, cols = events // COLS, events % COLS
    if d.kind == "rectangle":
        return (rows >= d.row0) & (rows < d.row0 + d.rows) & (cols >= d.col0) & (cols < d.col0 + d.cols)
    if d.kind == "disk":
        mask = masks.circular(d.centre_col, d.centre_row, COLS, ROWS, d.radius)
    else:
        mask = masks.ring(d.centre_col, d.centre_row, COLS, ROWS, d.outer, d.inner)
    return mask.reshape(-1)[events]


def reference(detectors: VirtualDetectors, frames: list[np.ndarray]) -> dict[str, np.ndarray]:
    out: dict[str, list[float]] = {name: [] for name in [*detectors.names, "com_x", "com_y"]}
    for events in frames:
        for d in detectors.detectors:
            out[d.name].append(np.count_nonzero(inside(d, events)))
        out["com_x"].append((events % COLS - detectors.centre_col).mean() if len(events) else np.nan)
        out["com_y"].append((events // COLS - detectors.centre_row).mean() if len(events) else np.nan)
    return {name: np.array(values) for name, values in out.items()}


def test_images_equal_the_numpy_reference_frame_by_frame() -> None:
    rng = np.random.default_rng(5)
    frames = [np.unique(rng.integers(0, ROWS * COLS, rng.integers(0, 60))).astype(np.uint32) for _ in range(200)]
    frames[3] = np.zeros(0, np.uint32)  # a frame without electrons: no centre of mass
    detectors = VirtualDetectors(centre_row=23.0, centre_col=21.5, detectors=[
        VirtualDetector(name="bright_field", kind="disk", centre_row=23.0, centre_col=21.5, radius=7.0),
        # Whole-pixel centre and radii: pixels lie exactly on both circles (5 = |(3, 4)|, 13 = |(5, 12)|), so the
        # comparison checks which side of each edge they fall on.
        VirtualDetector(name="dark_field", kind="annulus", centre_row=23.0, centre_col=21.0, inner=5.0, outer=13.0),
        VirtualDetector(name="probe", kind="rectangle", row0=2, col0=30, rows=10, cols=10),
        # Overlapping the others, with a centre of its own: an electron counts in every detector it lies in.
        VirtualDetector(name="off_axis", kind="disk", centre_row=10.0, centre_col=12.0, radius=12.5),
    ])
    events = np.concatenate(frames)
    offsets = np.concatenate([[0], np.cumsum([len(f) for f in frames])]).astype(np.uint64)
    images = virtual_images(detectors, ROWS, COLS, events, offsets)
    expected = reference(detectors, frames)
    for name in detectors.names:
        assert expected[name].sum() > 0, name  # the frames reach every detector: the comparison means something
        np.testing.assert_array_equal(images[name], expected[name], err_msg=name)
    np.testing.assert_allclose(images["com_x"], expected["com_x"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(images["com_y"], expected["com_y"], rtol=1e-5, atol=1e-5)
    assert np.isnan(images["com_x"][3])
    np.testing.assert_array_equal(images["diffraction"], np.bincount(events, minlength=ROWS * COLS))


def test_no_detectors_still_give_the_centre_of_mass_and_pattern() -> None:
    detectors = VirtualDetectors(centre_row=0.5, centre_col=0.5, detectors=[])
    images = virtual_images(detectors, 4, 4, np.array([0, 5], np.uint32), np.array([0, 2], np.uint64))
    assert set(images) == {"com_x", "com_y", "diffraction"}
    assert images["com_x"][0] == pytest.approx(0.0) and images["com_y"][0] == pytest.approx(0.0)


def disk(name: str, radius: float = 1.0) -> VirtualDetector:
    return VirtualDetector(name=name, kind="disk", centre_row=1.0, centre_col=1.0, radius=radius)


@pytest.mark.parametrize(("detectors", "message"), [
    ([VirtualDetector(name="ring", kind="annulus", inner=5, outer=2)], "'ring': an annulus needs .* outer above inner"),
    ([disk("a", radius=0.0)], "'a': a disk's radius must be finite and above 0"),
    ([disk("a"), disk("a")], "'a': the name is used twice"),
    ([disk(f"d{i}") for i in range(17)], "lists 17, at most 16"),
    ([VirtualDetector(name="box", kind="rectangle", rows=0, cols=3)], "'box': a rectangle needs at least 1 row"),
])
def test_bad_detectors_are_refused_with_one_line(detectors: list[VirtualDetector], message: str) -> None:
    with pytest.raises(NodeGroupError, match=message) as error:
        VirtualDetectors(centre_row=1, centre_col=1, detectors=detectors)
    assert "\n" not in str(error.value)


def test_bad_kinds_rectangles_and_events_are_refused_with_one_line() -> None:
    with pytest.raises(NodeGroupError, match="kind 'square' is none of disk, annulus, rectangle"):
        VirtualDetector(name="s", kind="square")
    beyond = VirtualDetectors(centre_row=1, centre_col=1, detectors=[
        VirtualDetector(name="box", kind="rectangle", row0=2, col0=0, rows=3, cols=1)])
    with pytest.raises(NodeGroupError, match="'box': the rectangle reaches past the 4 x 4 frame"):
        virtual_images(beyond, 4, 4, np.zeros(0, np.uint32), np.array([0], np.uint64))
    good = VirtualDetectors(centre_row=1, centre_col=1, detectors=[disk("a")])
    with pytest.raises(NodeGroupError, match="outside the frame"):
        virtual_images(good, 4, 4, np.array([16], np.uint32), np.array([0, 1], np.uint64))


def test_a_mask_detector_counts_the_electrons_on_its_pixels() -> None:
    rng = np.random.default_rng(9)
    mask = rng.random((ROWS, COLS)) < 0.3
    frames = [np.unique(rng.integers(0, ROWS * COLS, 50)).astype(np.uint32) for _ in range(40)]
    detectors = VirtualDetectors(centre_row=24.0, centre_col=20.0, detectors=[
        VirtualDetector(name="grains", kind="mask", mask=mask.reshape(-1).astype(np.uint8), mask_file="grains.npy")])
    events = np.concatenate(frames)
    offsets = np.concatenate([[0], np.cumsum([len(f) for f in frames])]).astype(np.uint64)
    images = virtual_images(detectors, ROWS, COLS, events, offsets)
    np.testing.assert_array_equal(images["grains"], [np.count_nonzero(mask.reshape(-1)[f]) for f in frames])
    assert detectors.detectors[0].pixels == np.count_nonzero(mask)
    with pytest.raises(NodeGroupError, match="'grains': the mask has 1920 pixels, the 40 x 40 frame 1600"):
        virtual_images(detectors, 40, 40, np.zeros(0, np.uint32), np.array([0], np.uint64))


def test_a_mask_file_is_read_where_the_nodegroups_start_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    shape = (load_config().detector.frame_rows, load_config().detector.frame_cols)
    good, wrong = tmp_path / "good.npy", tmp_path / "wrong.npy"
    mask = np.zeros(shape, bool)
    mask[10:20, 30:35] = True
    np.save(good, mask)
    np.save(wrong, np.ones((3, 3)))

    def config(path: str):
        data = tomllib.loads(DEFAULT_CONFIG.read_text())
        data["analysis"]["virtual_detectors"] = [{"name": "grains", "kind": "mask", "mask": path}]
        return config_from_dict(data)

    detector = detectors_from(config(str(good))).detectors[0]
    assert (detector.kind, detector.pixels, detector.mask_file) == ("mask", 50, str(good))
    for path, message in ((wrong, "is float64 3 x 3, expected numbers of the 576 x 576 frame"),
                          (tmp_path / "absent.npy", "cannot read mask")):
        with pytest.raises(SectorflowError, match=message) as error:
            detectors_from(config(str(path)))
        assert "\n" not in str(error.value)
