"""The live stream's decoder refuses, with a ValueError naming the fault, every message it cannot
use whole (live/SPEC.md): nothing a publisher sends can make a subscriber index outside its images
or allocate beyond the shapes a scan and a frame may have."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sectorflow.live import wire


def frames_batch(**header_changes: object) -> list[bytes]:
    batch = wire.Batch(wire.FRAMES, "ng", 4, (2, 3), (8, 8), False,
                       {"position": np.array([0, 5], np.uint64), "offsets": np.array([0, 2, 3], np.uint64),
                        "events": np.array([1, 63, 7], np.uint32)})
    parts = wire.encode(batch)
    header = json.loads(parts[1])
    header.update(header_changes)
    parts[1] = json.dumps(header).encode()
    return parts


def test_a_good_message_reads_back() -> None:
    batch = wire.decode(frames_batch())
    assert (batch.scan, batch.scan_shape, batch.frame_shape, batch.frames) == (4, (2, 3), (8, 8), 2)
    assert batch.arrays["events"].tolist() == [1, 63, 7]


@pytest.mark.parametrize("parts, fault", [
    ([], "empty"),
    ([b"news", b"{}"], "not a live message"),
    ([wire.FRAMES, b"not json", b"", b"", b""], "not a JSON object"),
    ([wire.FRAMES, b"[1, 2]", b"", b"", b""], "not a JSON object"),
    (frames_batch(v=1), "version 1"),
    (frames_batch(v=3), "version 3, this reader knows 4"),
    (frames_batch()[:4], "4 parts"),
    (frames_batch(scan_shape=5), "header"),
    (frames_batch(scan_shape=[1, 2, 3]), "header"),
    (frames_batch(scan_shape=[70000, 70000]), "outside 1 to 65535"),
    (frames_batch(frame_shape=[0, 8]), "outside 1 to 65535"),
    (frames_batch(uid=None, scan="four"), "header"),
    (frames_batch(scan_shape=[1, 3]), "position outside"),
    (frames_batch(frame_shape=[4, 8]), "event outside"),
])
def test_a_malformed_message_is_refused_naming_its_fault(parts: list[bytes], fault: str) -> None:
    with pytest.raises(ValueError, match=fault):
        wire.decode(parts)


def test_offsets_that_do_not_cut_the_events_in_order_are_refused() -> None:
    parts = frames_batch()
    for offsets in ([0, 3, 2], [1, 2, 3], [0, 2, 9]):
        parts[3] = np.array(offsets, np.uint64).tobytes()
        with pytest.raises(ValueError, match="offsets"):
            wire.decode(parts)
    parts[3] = np.array([0, 2], np.uint64).tobytes()
    with pytest.raises(ValueError, match="different lengths"):
        wire.decode(parts)


def test_shapes_whose_product_is_beyond_the_readers_bounds_are_refused_before_allocating() -> None:
    # Each side is allowed; the product is what a reader would allocate (16000 x 16000 x 4 images).
    with pytest.raises(ValueError, match="16000 x 16000 positions, beyond the 4194304"):
        wire.decode(frames_batch(scan_shape=[16000, 16000]), max_positions=2048 * 2048, max_frame_pixels=64)
    with pytest.raises(ValueError, match="frame of 9 x 8 pixels, beyond the 64"):
        wire.decode(frames_batch(frame_shape=[9, 8]), max_positions=6, max_frame_pixels=64)
    assert wire.decode(frames_batch(), max_positions=6, max_frame_pixels=64).scan_shape == (2, 3)


def test_acknowledgements_read_back_and_nothing_else_is_one() -> None:
    assert wire.parse_ack(wire.ack(0)) == 0 and wire.parse_ack(wire.ack(2**63)) == 2**63
    for request in (b"ack", b"ack ", b"ack -1", b"ack 1e3", b"ack 12x", b"ACK 1", b"ack " + b"9" * 21, b"subscribe"):
        assert wire.parse_ack(request) is None, request
    assert wire.decode(wire.encode(wire.decode(frames_batch()), seq=41)).seq == 41


def images_batch(names: tuple[str, ...] = ("bright_field", "probe"), **header_changes: object) -> list[bytes]:
    """An images message of detectors ``names`` (columns of the virtual detectors' kernel, after the
    centre of mass's), its header then changed (a publisher's lie)."""
    columns = ("com_x", "com_y", *names)
    arrays = {"position": np.array([0, 5], np.uint64), "offsets": np.array([0, 2, 3], np.uint64),
              "com_x": np.array([0.5, -1], np.float32),
              "com_y": np.array([1, 2], np.float32), "events": np.array([1, 63, 7], np.uint32),
              **{name: np.array([i, 10 + i], np.float32) for i, name in enumerate(names)}}
    parts = wire.encode(wire.Batch(wire.IMAGES, "ng", 4, (2, 3), (8, 8), False, arrays, columns=columns,
                                   detectors=names))
    header = json.loads(parts[1])
    header.update(header_changes)
    parts[1] = json.dumps(header).encode()
    return parts


def test_an_images_message_cuts_its_events_per_frame_and_refuses_offsets_that_do_not() -> None:
    batch = wire.decode(images_batch())
    assert batch.arrays["offsets"].tolist() == [0, 2, 3]  # what a reader's analyses compute per frame from
    parts = images_batch()
    parts[3] = np.array([0, 3, 2], np.uint64).tobytes()
    with pytest.raises(ValueError, match="live images message: offsets do not cut the events in order"):
        wire.decode(parts)


def test_an_images_message_carries_the_columns_it_names_and_says_which_are_detectors() -> None:
    batch = wire.decode(images_batch())
    assert batch.columns == ("com_x", "com_y", "bright_field", "probe")
    assert batch.detectors == ("bright_field", "probe")
    assert batch.arrays["probe"].tolist() == [1, 11] and batch.arrays["com_x"].tolist() == [0.5, -1]
    assert batch.arrays["probe"].dtype == np.dtype("<f4")
    assert wire.decode(images_batch(names=())).detectors == ()
    end = wire.encode(wire.Batch(wire.IMAGES, "ng", 4, (2, 3), (8, 8), True, {
        "position": np.zeros(0, np.uint64), "offsets": np.zeros(1, np.uint64), "events": np.zeros(0, np.uint32)}))
    assert wire.decode(end).columns == ()  # a scan's end names none


@pytest.mark.parametrize("parts, fault", [
    (images_batch(names=tuple(f"d{i}" for i in range(17))), "detectors must be a list of at most 16 names, got 17"),
    (images_batch(detectors="bright_field"), "must be a list of at most 16 names, got str"),
    (images_batch(columns=[f"c{i}" for i in range(33)]), "columns must be a list of at most 32 names, got 33"),
    (images_batch(columns=["com_x", "com_y", "bright_field", "probe", "x"]), "9 parts, expected 10"),
    (images_batch(detectors=["bright_field", "x"]), "detector 'x' is not one of its columns"),
    (images_batch(detectors=["bright_field", 7]), "detector name '7' is not one"),
    (images_batch(columns=["com_x", "com_y", "bright_field", "../etc"], detectors=["bright_field"]),
     "column name '../etc' is not an image's"),
    (images_batch(columns=["com_x", "com_y", "bright_field", "events"], detectors=["bright_field"]),
     "column name 'events' is not an image's"),
    (images_batch(detectors=["com_x"]), "detector name 'com_x' is not one"),
    (images_batch(detectors=["a" * 33, "probe"]), "detector name 'aaaa"),
    (images_batch(detectors=["probe", "probe"]), "a detector is named twice"),
    (images_batch(columns=["com_x", "com_x", "bright_field", "probe"]), "a column is named twice"),
])
def test_a_malformed_images_header_is_refused_naming_its_fault(parts: list[bytes], fault: str) -> None:
    with pytest.raises(ValueError, match=fault):
        wire.decode(parts)


def test_detector_arrays_of_another_length_than_the_positions_are_refused() -> None:
    parts = images_batch()
    parts[-2] = np.array([1, 2, 3], np.float32).tobytes()  # probe's array: three values for two frames
    with pytest.raises(ValueError, match="different lengths"):
        wire.decode(parts)
