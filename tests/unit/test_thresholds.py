"""Counting thresholds against stempy 3.6.0's calculate_thresholds on the same sample: the
statistics exactly, the Gaussian fit to a tight tolerance; and what we do where stempy breaks."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import stempy._image as stempy_image
import stempy.io as stio
from counting_frames import dark_map, gain_map, simulated_frames

from sectorflow.configs import CountingConfig
from sectorflow.consumer.counting import (
    STATISTICS_FIELDS,
    CountingError,
    calculate_thresholds,
    statistics_dict,
    thresholds_for_scan,
)

# stempy draws its sample frames at random; a file of one frame makes its sample that frame,
# number_of_samples times over, which our sample reproduces exactly.
EXACT = ("number_of_samples", "min_sample", "max_sample", "number_of_bins", "mean",
         "x_ray_threshold_n_sigma", "background_threshold_n_sigma")
CLOSE = ("variance", "std_dev", "x_ray_threshold")  # sums in another order: 1e-12
# stempy's Levenberg-Marquardt (Eigen's, default tolerances) stops once a step is below 1.5e-8 of
# the scaled parameter vector, which the amplitude (thousands of counts) dominates: its mean and
# sigma lie up to ~1e-6 (relative) from the least-squares minimum ours iterates to; see
# test_fit_is_the_least_squares_minimum.
FITTED = ("optimized_mean", "optimized_std_dev", "background_threshold")
FIT_TOLERANCE = 1e-5


def stempy_thresholds(tmp_path, frame, copies, dark, gain, background_n_sigma, x_ray_n_sigma):
    path = tmp_path / "sample.h5"
    stio.save_raw_data(str(path), frame[np.newaxis], scan_dimensions=(1, 1))
    args = []
    if dark is not None:
        args.append(dark)
    args += [copies, background_n_sigma, x_ray_n_sigma]
    if gain is not None:
        args.append(np.power(gain, -1).astype(np.float32))  # what stempy's Python API passes down
    with h5py.File(path, "r") as f:
        block = next(stio.reader(f))
        result = stempy_image.calculate_thresholds([block._block], *args)
    names = {"x_ray_threshold": "xray_threshold", "x_ray_threshold_n_sigma": "xray_threshold_n_sigma"}
    fields = [name for name in STATISTICS_FIELDS if name != "threshold_calculated"]
    return {name: getattr(result, names.get(name, name)) for name in fields}


@pytest.mark.parametrize("electrons_per_frame", [20, 2000, 20000])
@pytest.mark.parametrize("corrections", ["none", "dark", "gain", "dark+gain"])
def test_thresholds_equal_stempy(tmp_path, electrons_per_frame, corrections):
    shape = (192, 192)
    frame = simulated_frames(1, shape, electrons_per_frame=electrons_per_frame / 9, seed=electrons_per_frame)[0]
    # A dark below every raw value: stempy wraps negative values around uint16 (see below).
    dark = dark_map(shape, mean=4.0, spread=1.5) if "dark" in corrections else None
    gain = gain_map(shape) if "gain" in corrections else None
    copies = 3

    expected = stempy_thresholds(tmp_path, frame, copies, dark, gain, 4.5, 175.0)
    ours = statistics_dict(calculate_thresholds([frame] * copies, dark_reference=dark, gain=gain,
                                                background_threshold_n_sigma=4.5, x_ray_threshold_n_sigma=175.0))

    assert ours["threshold_calculated"] is True
    for name in EXACT:
        assert ours[name] == expected[name], name
    for name in CLOSE:
        assert ours[name] == pytest.approx(expected[name], rel=1e-12), name
    for name in FITTED:
        assert ours[name] == pytest.approx(expected[name], rel=FIT_TOLERANCE), name


def test_thresholds_of_a_full_frame_equal_stempy(tmp_path):
    frame = simulated_frames(1, (576, 576), electrons_per_frame=500, seed=4)[0]
    expected = stempy_thresholds(tmp_path, frame, 1, None, None, 4.0, 10.0)
    ours = statistics_dict(calculate_thresholds(frame))
    for name in EXACT:
        assert ours[name] == expected[name], name
    for name in CLOSE:
        assert ours[name] == pytest.approx(expected[name], rel=1e-12), name
    for name in FITTED:
        assert ours[name] == pytest.approx(expected[name], rel=FIT_TOLERANCE), name


def test_fit_is_the_least_squares_minimum(tmp_path):
    frame = simulated_frames(1, (192, 192), electrons_per_frame=200, seed=20)[0]
    ours = calculate_thresholds(frame)
    expected = stempy_thresholds(tmp_path, frame, 1, None, None, 4.0, 10.0)
    # The histogram both fit: one bin per ADU over [min, max) (this sample's bin range).
    values = frame.ravel().astype(np.int64)
    bins = np.arange(values.min(), values.max(), dtype=np.float64)
    counts = np.bincount(values - values.min())[: len(bins)].astype(np.float64)
    assert len(bins) == ours.number_of_bins

    def sum_of_squares(mean, sigma):
        shape = np.exp(-((bins - mean) ** 2) / (2 * sigma**2))
        amplitude = shape @ counts / (shape @ shape)  # the best amplitude for this mean and sigma
        return float(((amplitude * shape - counts) ** 2).sum())

    best = sum_of_squares(ours.optimized_mean, ours.optimized_std_dev)
    assert best <= sum_of_squares(expected["optimized_mean"], expected["optimized_std_dev"])
    for d_mean, d_sigma in [(1e-6, 0), (-1e-6, 0), (0, 1e-6), (0, -1e-6)]:
        assert best < sum_of_squares(ours.optimized_mean + d_mean, ours.optimized_std_dev + d_sigma)


def test_thresholds_describe_the_noise():
    frames = simulated_frames(4, (128, 128), electrons_per_frame=30, dark=20.0, noise_adu=2.2, seed=8)
    statistics = calculate_thresholds(frames, background_threshold_n_sigma=4.5, x_ray_threshold_n_sigma=175.0)
    assert statistics.number_of_samples == 4
    assert statistics.optimized_mean == pytest.approx(20.0, abs=0.2)
    assert statistics.optimized_std_dev == pytest.approx(2.2, abs=0.15)
    assert statistics.background_threshold == pytest.approx(
        statistics.optimized_mean + 4.5 * statistics.optimized_std_dev
    )
    assert statistics.x_ray_threshold == pytest.approx(statistics.mean + 175.0 * statistics.std_dev)


def test_dark_subtracted_values_below_zero_stay_negative(tmp_path):
    # With a realistic dark reference (its mean at the noise mean) half the pixels go below 0.
    # stempy 3.6.0 keeps them in uint16, where they wrap to ~65535, and fails; we keep them signed.
    shape = (96, 96)
    dark = dark_map(shape, mean=20.0, spread=0.5)
    frame = simulated_frames(1, shape, electrons_per_frame=5, dark=dark, seed=6)[0]
    with pytest.raises(ValueError):
        stempy_thresholds(tmp_path, frame, 1, dark, None, 4.0, 10.0)

    statistics = calculate_thresholds(frame, dark_reference=dark)
    assert statistics.min_sample < 0
    # raw - trunc(dark): truncating a dark of 20 +- 0.5 leaves half an ADU on average.
    assert statistics.optimized_mean == pytest.approx(0.5, abs=0.2)
    assert statistics.optimized_std_dev == pytest.approx(2.25, abs=0.2)

    # With a gain the values are floats floored to whole ADU (about -1 on average here); the
    # noise keeps its width instead of piling up at 0.
    with_gain = calculate_thresholds(frame, dark_reference=dark, gain=gain_map(shape))
    assert with_gain.optimized_mean == pytest.approx(-1.0, abs=0.3)
    assert with_gain.optimized_std_dev == pytest.approx(2.25, abs=0.25)


def test_thresholds_for_scan_follows_the_configuration():
    frames = simulated_frames(2, (64, 64), electrons_per_frame=10, seed=12)
    computed = thresholds_for_scan(CountingConfig(background_sigma=4.5, xray_sigma=175.0), frames)
    assert computed.threshold_calculated
    assert computed.background_threshold_n_sigma == 4.5

    fixed = thresholds_for_scan(CountingConfig(background_threshold=28.5, xray_threshold=435.0), frames)
    assert (fixed.threshold_calculated, fixed.background_threshold, fixed.x_ray_threshold) == (False, 28.5, 435.0)

    half = thresholds_for_scan(CountingConfig(xray_threshold=435.0), frames)
    assert half.x_ray_threshold == 435.0
    assert half.background_threshold == computed.background_threshold


@pytest.mark.parametrize(
    ("sample", "kwargs", "message"),
    [
        (np.zeros((0, 8, 8), dtype=np.uint16), {}, "threshold sample is empty"),
        ([], {}, "threshold sample is empty"),
        (np.full((2, 8, 8), 20, dtype=np.uint16), {}, r"values span only 20 to 20 ADU \(0 histogram bins\)"),
        (np.zeros((2, 8, 8), dtype=np.float32), {}, "frames has dtype float32, expected uint16"),
        (np.zeros((2, 8), dtype=np.uint16), {"dark_reference": np.zeros((8, 8))},
         r"dark_reference has shape \(8, 8\), expected the frame shape \(2, 8\)"),
        (np.zeros((2, 8, 8), dtype=np.uint16), {"dark_reference": np.zeros((8, 9))},
         r"dark_reference has shape \(8, 9\), expected the frame shape \(8, 8\)"),
        ([np.zeros((8, 8), dtype=np.uint16), np.zeros((8, 7), dtype=np.uint16)], {},
         r"frames\[1\] has shape \(8, 7\), expected \(8, 8\)"),
    ],
)
def test_bad_sample_is_a_clear_error(sample, kwargs, message):
    with pytest.raises(CountingError, match=message):
        calculate_thresholds(sample, **kwargs)
