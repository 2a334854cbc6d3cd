"""Electron counting against stempy 3.6.0: event for event, frame for frame, given the same
thresholds; batches equal single frames; row-dark correction equals stempy's; bad input is one
clear CountingError."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import stempy.image as stim
from counting_frames import dark_map, gain_map, simulated_frames

from sectorflow.consumer.counting import Counter, CountingError, count_frame, given_thresholds
from sectorflow.errors import SectorflowError

SHAPE = (576, 576)
DARK = dark_map(SHAPE)
GAIN = gain_map(SHAPE)
# Thresholds near what calculate_thresholds gives these frames at 4.5 / 175 sigma: background
# just above the noise, x-ray threshold below the brightest electrons so both cuts matter.
THRESHOLDS = {
    "none": (30.4, 420.0),
    "dark": (9.9, 400.0),
    "gain": (31.3, 430.0),
    "dark+gain": (10.2, 410.0),
}


def stempy_events(frame, background, x_ray, dark=None, gain=None):
    return stim.electron_count_frame(
        frame, darkreference=dark, background_threshold=background, xray_threshold=x_ray, gain=gain
    ).data[0, 0]


@pytest.mark.parametrize("electrons_per_frame", [20, 2000, 20000])
@pytest.mark.parametrize("corrections", ["none", "dark", "gain", "dark+gain"])
def test_events_equal_stempy_frame_for_frame(electrons_per_frame, corrections):
    frames = simulated_frames(3, SHAPE, electrons_per_frame=electrons_per_frame, dark=DARK, seed=electrons_per_frame)
    dark = DARK if "dark" in corrections else None
    gain = GAIN if "gain" in corrections else None
    background, x_ray = THRESHOLDS[corrections]
    counter = Counter(SHAPE, background_threshold=background, x_ray_threshold=x_ray, dark_reference=dark, gain=gain)

    for index, frame in enumerate(frames):
        expected = stempy_events(frame, background, x_ray, dark, gain)
        ours = counter.count(frame)
        assert ours.dtype == np.uint32
        assert len(expected) > 0
        np.testing.assert_array_equal(ours, expected, err_msg=f"frame {index}")


@pytest.mark.parametrize("corrections", ["none", "dark", "gain", "dark+gain"])
def test_edge_cases_equal_stempy(corrections):
    # Small non-square frames with plateaus of equal values (the strict maximum), pixels on
    # every border, thresholds that are exact integers, and dark values that truncate.
    rng = np.random.default_rng(7)
    shape = (13, 21)
    frames = rng.integers(0, 40, size=(40, *shape)).astype(np.uint16)
    frames[:, ::4, ::3] = 35
    dark = rng.uniform(-0.5, 12.0, size=shape).astype(np.float32) if "dark" in corrections else None
    gain = rng.uniform(0.5, 2.0, size=shape).astype(np.float32) if "gain" in corrections else None
    for background, x_ray in [(5.0, 35.0), (4.5, 30.5), (0.0, 1e9), (-3.0, 39.0), (20.0, 21.0), (100.0, 50.0)]:
        counter = Counter(shape, background_threshold=background, x_ray_threshold=x_ray, dark_reference=dark, gain=gain)
        for index, frame in enumerate(frames):
            np.testing.assert_array_equal(
                counter.count(frame),
                stempy_events(frame, background, x_ray, dark, gain),
                err_msg=f"frame {index}, thresholds {background}, {x_ray}",
            )


@pytest.mark.parametrize("frame", [[[0]], [[7]], [[0, 5, 3, 7, 7, 2]], [[0], [5], [3], [9]]])
def test_degenerate_shapes_equal_stempy(frame):
    frame = np.array(frame, dtype=np.uint16)
    ours = count_frame(frame, background_threshold=1.0, x_ray_threshold=100.0)
    np.testing.assert_array_equal(ours, stempy_events(frame, 1.0, 100.0))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_batch_equals_frame_by_frame(threads):
    frames = simulated_frames(7, (64, 80), electrons_per_frame=60, dark=DARK[:64, :80], seed=3)
    counter = Counter((64, 80), background_threshold=9.9, x_ray_threshold=400.0, dark_reference=DARK[:64, :80],
                      threads=threads)
    single = [counter.count(frame) for frame in frames]

    as_stack = counter.count_batch(frames)
    as_list = counter.count_batch(list(frames))
    events, offsets = counter.count_flat(frames)

    assert counter.threads == threads
    assert len(as_stack) == len(as_list) == 7
    assert offsets.tolist() == np.cumsum([0] + [len(e) for e in single]).tolist()
    for i, expected in enumerate(single):
        np.testing.assert_array_equal(as_stack[i], expected)
        np.testing.assert_array_equal(as_list[i], expected)
        np.testing.assert_array_equal(events[offsets[i]:offsets[i + 1]], expected)


def test_counter_shared_by_python_threads_counts_every_frame_right():
    frames = simulated_frames(6, (64, 80), electrons_per_frame=60, seed=4)
    counter = Counter((64, 80), background_threshold=30.4, x_ray_threshold=420.0, threads=2)
    expected = [stempy_events(frame, 30.4, 420.0) for frame in frames]

    def count_all(_: int) -> list:
        return [counter.count(frame) for frame in frames] + counter.count_batch(frames)

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(count_all, range(6), timeout=60))
    for result in results:
        for index, events in enumerate(result):
            np.testing.assert_array_equal(events, expected[index % 6])


def test_empty_batch_gives_no_frames():
    counter = Counter((8, 8), background_threshold=1.0)
    assert counter.count_batch(np.zeros((0, 8, 8), dtype=np.uint16)) == []


def test_counter_from_thresholds_uses_them():
    statistics = given_thresholds(30.4, 420.0)
    counter = Counter.from_thresholds(statistics, SHAPE)
    frame = simulated_frames(1, SHAPE, seed=11)[0]
    assert counter.options.background_threshold == 30.4
    np.testing.assert_array_equal(counter.count(frame), stempy_events(frame, 30.4, 420.0))


def test_non_contiguous_frame_counts_like_its_copy():
    frames = simulated_frames(1, (64, 128), electrons_per_frame=40, seed=5)
    view = frames[0][:, ::2]
    counter = Counter(view.shape, background_threshold=30.4, x_ray_threshold=420.0)
    np.testing.assert_array_equal(counter.count(view), counter.count(np.ascontiguousarray(view)))


# Row-dark correction exists in stempy only inside electron_count over a reader; its public
# wrapper draws thresholds at random, so the reference calls the same C++ entry point with fixed
# thresholds through stempy's own options object. A dark reference is always given (zeros when
# "none"): stempy's reader path crashes without one.
@pytest.mark.parametrize("statistic", ["mean", "median"])
@pytest.mark.parametrize("corrections", ["none", "dark", "gain", "dark+gain"])
def test_row_dark_equals_stempy(tmp_path, statistic, corrections):
    import h5py
    import stempy._image as stempy_image
    import stempy.io as stio

    shape = (48, 48)
    rng = np.random.default_rng(17)
    frames = simulated_frames(4, shape, electrons_per_frame=40, seed=9).astype(np.float64)
    frames += rng.normal(0.0, 3.0, size=(4, shape[0], 1))  # row offsets that row-dark removes
    frames = np.clip(np.rint(frames), 0, 65535).astype(np.uint16)
    dark = rng.uniform(0.0, 3.0, size=shape).astype(np.float32) if "dark" in corrections else None
    gain = gain_map(shape) if "gain" in corrections else None
    background, x_ray, level = 24.0, 400.0, 20.3

    stio.save_raw_data(str(tmp_path / "raw.h5"), frames, scan_dimensions=(2, 2))
    options = stempy_image.ElectronCountOptionsClassic()
    options.dark_reference = dark if dark is not None else np.zeros(shape, dtype=np.float32)
    if gain is not None:
        options.gain = np.power(gain, -1).astype(np.float32)
    options.background_threshold = background
    options.x_ray_threshold = x_ray
    options.apply_row_dark_subtraction = True
    options.apply_row_dark_use_mean = statistic == "mean"
    options.optimized_mean = level
    options.scan_dimensions = (2, 2)
    with h5py.File(tmp_path / "raw.h5", "r") as f:
        reader = stio.reader(f)
        counted = stempy_image.electron_count(reader.begin(), reader.end(), options)
        expected = [np.asarray(counted.data[i][0]) for i in range(4)]

    counter = Counter(shape, background_threshold=background, x_ray_threshold=x_ray, dark_reference=dark, gain=gain,
                      row_dark=statistic, optimized_mean=level)
    for index, frame in enumerate(frames):
        assert len(expected[index]) > 0
        np.testing.assert_array_equal(counter.count(frame), expected[index], err_msg=f"frame {index}")


def test_counting_error_is_a_sectorflow_error():
    assert issubclass(CountingError, SectorflowError)
    assert issubclass(CountingError, ValueError)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (np.zeros((8, 8), dtype=np.float64), "frame has dtype float64, expected uint16"),
        (np.zeros((8, 8), dtype=np.int16), "frame has dtype int16, expected uint16"),
        (np.zeros((8, 9), dtype=np.uint16), r"frame has shape \(8, 9\), expected \(8, 8\)"),
        (np.zeros(64, dtype=np.uint16), r"frame has shape \(64,\), expected \(8, 8\)"),
        ([[0] * 8] * 8, "frame is a list, expected a numpy uint16 array"),
    ],
)
def test_bad_frame_is_a_clear_error(frame, message):
    counter = Counter((8, 8), background_threshold=1.0)
    with pytest.raises(CountingError, match=message):
        counter.count(frame)


def test_bad_batch_names_the_frame():
    counter = Counter((8, 8), background_threshold=1.0)
    frames = [np.zeros((8, 8), dtype=np.uint16), np.zeros((8, 7), dtype=np.uint16)]
    with pytest.raises(CountingError, match=r"frames\[1\] has shape \(8, 7\), expected \(8, 8\)"):
        counter.count_batch(frames)
    with pytest.raises(CountingError, match=r"frames has shape \(3, 8, 7\), expected \(n, 8, 8\)"):
        counter.count_batch(np.zeros((3, 8, 7), dtype=np.uint16))
    with pytest.raises(CountingError, match="frames has dtype float32, expected uint16"):
        counter.count_batch(np.zeros((3, 8, 8), dtype=np.float32))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dark_reference": np.zeros((8, 9))}, r"dark_reference has shape \(8, 9\), expected the frame shape \(8, 8\)"),
        ({"gain": np.ones((4, 4))}, r"gain has shape \(4, 4\), expected the frame shape \(8, 8\)"),
        ({"gain": np.where(np.eye(8) > 0, 0.0, 1.0)}, r"gain is 0.0 at pixel \(0, 0\)"),
        ({"dark_reference": np.full((8, 8), np.nan)}, r"dark reference at pixel \(0, 0\) is nan"),
        ({"row_dark": "mode"}, "row_dark must be None, 'mean' or 'median', got 'mode'"),
        ({"row_dark": "mean"}, "row_dark needs optimized_mean"),
        ({"threads": 0}, "threads must be at least 1, got 0"),
        ({"background_threshold": float("nan")}, "counting thresholds must be numbers"),
    ],
)
def test_bad_counter_settings_are_clear_errors(kwargs, message):
    settings = {"background_threshold": 1.0, **kwargs}
    with pytest.raises(CountingError, match=message):
        Counter((8, 8), **settings)


def test_bad_frame_shape_is_a_clear_error():
    with pytest.raises(CountingError, match="frame shape must be positive, got 0 x 8"):
        Counter((0, 8), background_threshold=1.0)
