"""Electron counting with numpy arrays in and out: thresholds from a sample, one frame, a batch.

The work is done by the C++ kernels in ``sectorflow._core.counting`` with the GIL released; this
module converts and checks the inputs so that a mistake is one clear :class:`CountingError`.
Frames are read in place (C-contiguous uint16 arrays are never copied); events are new uint32
arrays of ascending flat indices ``row * cols + col``, or views of one such array for a batch.

Conventions are stempy's Python API (``stempy.image.electron_count_frame``): ``dark_reference`` is
subtracted (as float32) and each pixel is divided by ``gain``, computed as stempy does it, as a
multiplication by ``float32(1 / gain)``. Given the same thresholds, the events equal stempy 3.6.0's
event for event.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sectorflow._core.counting import (
    BatchCounter,
    Calibration,
    CountingError,
    CountingOptions,
    ElectronCounter,
    FrameShape,
    RowDark,
    ThresholdStatistics,
)
from sectorflow._core.counting import calculate_thresholds as _calculate_thresholds

if TYPE_CHECKING:
    from sectorflow.configs import CountingConfig

log = logging.getLogger(__name__)

#: The statistics stempy writes to /metadata/electron_counting, in its order.
STATISTICS_FIELDS: tuple[str, ...] = (
    "threshold_calculated",
    "background_threshold",
    "x_ray_threshold",
    "number_of_samples",
    "min_sample",
    "max_sample",
    "mean",
    "variance",
    "std_dev",
    "number_of_bins",
    "x_ray_threshold_n_sigma",
    "background_threshold_n_sigma",
    "optimized_mean",
    "optimized_std_dev",
)

_ROW_DARK = {None: RowDark.none, "none": RowDark.none, "mean": RowDark.mean, "median": RowDark.median}


def statistics_dict(statistics: ThresholdStatistics) -> dict[str, Any]:
    """The statistics as a plain dict keyed by :data:`STATISTICS_FIELDS` (for HDF5 attributes)."""
    return {name: getattr(statistics, name) for name in STATISTICS_FIELDS}


def given_thresholds(background_threshold: float, x_ray_threshold: float) -> ThresholdStatistics:
    """Statistics for thresholds that were given rather than computed (``threshold_calculated`` False)."""
    statistics = ThresholdStatistics()
    statistics.threshold_calculated = False
    statistics.background_threshold = float(background_threshold)
    statistics.x_ray_threshold = float(x_ray_threshold)
    return statistics


def thresholds_for_scan(
    counting: CountingConfig,
    sample: Any,
    *,
    dark_reference: Any = None,
    gain: Any = None,
) -> ThresholdStatistics:
    """The thresholds a scan is counted with, as the ``[counting]`` configuration asks.

    Both fixed thresholds set (nonzero): they are used as given. Otherwise the thresholds are
    computed from ``sample`` with the configured n_sigma values, and a fixed one replaces its
    computed value.

    :param counting: the ``[counting]`` section of the configuration.
    :param sample: the frames to compute from (see :func:`calculate_thresholds`).
    :param dark_reference: None or a (rows, cols) array subtracted from each frame.
    :param gain: None or a (rows, cols) array each pixel is divided by.
    :raises CountingError: as :func:`calculate_thresholds`.
    """
    if counting.background_threshold > 0 and counting.xray_threshold > 0:
        return given_thresholds(counting.background_threshold, counting.xray_threshold)
    statistics = calculate_thresholds(
        sample,
        dark_reference=dark_reference,
        gain=gain,
        background_threshold_n_sigma=counting.background_sigma,
        x_ray_threshold_n_sigma=counting.xray_sigma,
    )
    if counting.background_threshold > 0:
        statistics.background_threshold = counting.background_threshold
    if counting.xray_threshold > 0:
        statistics.x_ray_threshold = counting.xray_threshold
    log.info(
        "thresholds from %d frames: background %.3f ADU, x-ray %.3f ADU (optimized mean %.3f, sigma %.3f)",
        statistics.number_of_samples, statistics.background_threshold, statistics.x_ray_threshold,
        statistics.optimized_mean, statistics.optimized_std_dev,
    )
    return statistics


def _frame_shape(shape: Sequence[int]) -> FrameShape:
    try:
        rows, cols = (int(n) for n in shape)
    except (TypeError, ValueError):
        raise CountingError(f"frame shape must be (rows, cols), got {shape!r}") from None
    if rows <= 0 or cols <= 0:
        raise CountingError(f"frame shape must be positive, got {rows} x {cols}")
    return FrameShape(rows, cols)


def _pixel_map(values: Any, shape: FrameShape, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.shape != (shape.rows, shape.cols):
        raise CountingError(f"{name} has shape {array.shape}, expected the frame shape ({shape.rows}, {shape.cols})")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise CountingError(f"{name} has dtype {array.dtype}, expected numbers")
    return array


def make_calibration(
    frame_shape: Sequence[int], dark_reference: Any = None, gain: Any = None
) -> Calibration:
    """Validate and convert the per-pixel maps, as stempy's Python API does.

    :param frame_shape: (rows, cols) of a frame.
    :param dark_reference: None or a (rows, cols) array subtracted from each frame (cast to float32).
    :param gain: None or a (rows, cols) array each pixel is divided by (stempy's meaning).
    :returns: the C++ calibration (it holds copies of the maps).
    :raises CountingError: wrong shape or dtype, a zero gain, a value that is not finite.
    """
    shape = _frame_shape(frame_shape)
    dark = None
    if dark_reference is not None:
        dark = np.ascontiguousarray(_pixel_map(dark_reference, shape, "dark_reference"), dtype=np.float32)
    factor = None
    if gain is not None:
        divisor = _pixel_map(gain, shape, "gain").astype(np.float64)
        bad = np.argwhere((divisor == 0) | ~np.isfinite(divisor))
        if bad.size:
            row, col = bad[0]
            raise CountingError(
                f"gain is {divisor[row, col]} at pixel ({row}, {col}); each pixel is divided by its gain, "
                "which must be finite and nonzero"
            )
        # Division in float64 then rounding gives float32(1 / gain) exactly as stempy's float32 math.
        factor = np.ascontiguousarray(np.reciprocal(divisor).astype(np.float32))
    return Calibration(shape, dark_reference=dark, gain_factor=factor)


def _frames(frames: Any, shape: FrameShape | None = None) -> np.ndarray | list[np.ndarray]:
    """A 3-D uint16 array or a list of 2-D ones, unchanged (no copy); clear errors otherwise."""
    if isinstance(frames, np.ndarray):
        if frames.ndim == 2:
            frames = frames[np.newaxis]
        if frames.ndim != 3:
            raise CountingError(f"frames has shape {frames.shape}, expected (n, rows, cols)")
        if frames.dtype != np.uint16:
            raise CountingError(f"frames has dtype {frames.dtype}, expected uint16 (raw detector counts)")
        return np.ascontiguousarray(frames)
    if isinstance(frames, (str, bytes)) or not isinstance(frames, Sequence):
        raise CountingError(f"frames must be a uint16 array or a list of them, got {type(frames).__name__}")
    return [_frame(f, shape, f"frames[{i}]") for i, f in enumerate(frames)]


def _frame(frame: Any, shape: FrameShape | None, name: str = "frame") -> np.ndarray:
    if not isinstance(frame, np.ndarray):
        raise CountingError(f"{name} is a {type(frame).__name__}, expected a numpy uint16 array")
    if frame.dtype != np.uint16:
        raise CountingError(f"{name} has dtype {frame.dtype}, expected uint16 (raw detector counts)")
    if frame.ndim != 2 or (shape is not None and frame.shape != (shape.rows, shape.cols)):
        expected = f"({shape.rows}, {shape.cols})" if shape is not None else "(rows, cols)"
        raise CountingError(f"{name} has shape {frame.shape}, expected {expected}")
    return np.ascontiguousarray(frame)


def calculate_thresholds(
    sample: Any,
    *,
    dark_reference: Any = None,
    gain: Any = None,
    background_threshold_n_sigma: float = 4.0,
    x_ray_threshold_n_sigma: float = 10.0,
) -> ThresholdStatistics:
    """Counting thresholds from a sample of frames, as stempy's ``calculate_thresholds``.

    Every frame of the sample is used once; choose them (stempy draws ``number_of_samples`` frames
    at random). See thresholds.hpp for the statistics and where they differ from stempy.

    :param sample: (n, rows, cols) uint16 array, one (rows, cols) frame, or a list of frames.
    :param dark_reference: None or a (rows, cols) array subtracted from each frame.
    :param gain: None or a (rows, cols) array each pixel is divided by.
    :param background_threshold_n_sigma: background = optimized mean + this x optimized std.
    :param x_ray_threshold_n_sigma: x-ray threshold = mean + this x std.
    :returns: every statistic stempy reports (:data:`STATISTICS_FIELDS`).
    :raises CountingError: bad input, a sample without noise, a fit that does not converge.
    """
    frames = _frames(sample)
    first = frames[0] if len(frames) else None
    if first is None:
        raise CountingError("threshold sample is empty; pass at least one frame")
    calibration = make_calibration(first.shape, dark_reference, gain)
    statistics = _calculate_thresholds(
        frames,
        calibration,
        background_threshold_n_sigma=float(background_threshold_n_sigma),
        x_ray_threshold_n_sigma=float(x_ray_threshold_n_sigma),
    )
    log.debug("thresholds from %d frames: %s", len(frames), statistics)
    return statistics


class Counter:
    """Counts frames of one shape with fixed thresholds and corrections, on one or more threads.

    Build it once per scan and reuse it: it owns its scratch buffers and worker threads.

    :param frame_shape: (rows, cols) of every frame.
    :param background_threshold: ADU; pixels at or below become 0.
    :param x_ray_threshold: ADU; pixels at or above become 0.
    :param dark_reference: None or a (rows, cols) array subtracted from each frame.
    :param gain: None or a (rows, cols) array each pixel is divided by.
    :param row_dark: None, "mean" or "median": stempy's row-dark correction.
    :param optimized_mean: the level row-dark correction scales to (required with ``row_dark``).
    :param threads: threads counting a batch, the caller's included (``None``: every CPU).
    :raises CountingError: bad shape, maps, thresholds or thread count.
    """

    def __init__(
        self,
        frame_shape: Sequence[int],
        *,
        background_threshold: float,
        x_ray_threshold: float = float("inf"),
        dark_reference: Any = None,
        gain: Any = None,
        row_dark: str | None = None,
        optimized_mean: float | None = None,
        threads: int | None = 1,
    ) -> None:
        if row_dark not in _ROW_DARK:
            raise CountingError(f"row_dark must be None, 'mean' or 'median', got {row_dark!r}")
        if row_dark not in (None, "none") and optimized_mean is None:
            raise CountingError("row_dark needs optimized_mean (ThresholdStatistics.optimized_mean)")
        if threads is None:
            threads = os.cpu_count() or 1
        if int(threads) < 1:
            raise CountingError(f"threads must be at least 1, got {threads}")
        self._calibration = make_calibration(frame_shape, dark_reference, gain)
        options = CountingOptions(
            background_threshold=float(background_threshold),
            x_ray_threshold=float(x_ray_threshold),
            row_dark=_ROW_DARK[row_dark],
            optimized_mean=float(optimized_mean or 0.0),
        )
        self._counter = ElectronCounter(self._calibration, options)
        self._batch = BatchCounter(self._counter, int(threads))

    @classmethod
    def from_thresholds(
        cls, statistics: ThresholdStatistics, frame_shape: Sequence[int], **kwargs: Any
    ) -> Counter:
        """A counter using computed thresholds (and their optimized mean for row-dark correction).

        :param statistics: from :func:`calculate_thresholds` or :func:`given_thresholds`.
        :param frame_shape: (rows, cols) of every frame.
        :param kwargs: dark_reference, gain, row_dark, optimized_mean (default: the statistics'),
            threads, as for :class:`Counter`.
        """
        if kwargs.get("row_dark") not in (None, "none"):
            kwargs.setdefault("optimized_mean", statistics.optimized_mean)
        return cls(
            frame_shape,
            background_threshold=statistics.background_threshold,
            x_ray_threshold=statistics.x_ray_threshold,
            **kwargs,
        )

    @property
    def frame_shape(self) -> tuple[int, int]:
        """(rows, cols) of the frames this counter takes."""
        shape = self._calibration.shape
        return (shape.rows, shape.cols)

    @property
    def threads(self) -> int:
        """Threads counting a batch, the caller's included."""
        return self._batch.threads

    @property
    def options(self) -> CountingOptions:
        """Thresholds and row-dark settings in use."""
        return self._counter.options

    @property
    def metadata(self) -> dict[str, Any]:
        """How frames are corrected, for /metadata/electron_counting beside the statistics."""
        row_dark = self._counter.options.row_dark
        return {
            "dark_reference_applied": self._calibration.has_dark_reference,
            "gain_applied": self._calibration.has_gain,
            "row_dark": row_dark.name,
            "row_dark_level": self._counter.options.optimized_mean if row_dark != RowDark.none else 0.0,
        }

    def count(self, frame: np.ndarray) -> np.ndarray:
        """Count one frame.

        :param frame: (rows, cols) uint16 array, read in place when C-contiguous.
        :returns: ascending flat indices of the events, a new uint32 array.
        :raises CountingError: wrong dtype or shape.
        """
        shape = self._calibration.shape
        return self._counter.count(_frame(frame, shape))

    def count_batch(self, frames: Any) -> list[np.ndarray]:
        """Count many frames on :attr:`threads` threads.

        :param frames: (n, rows, cols) uint16 array or a list of (rows, cols) uint16 arrays.
        :returns: per frame, its events: views into one uint32 array.
        :raises CountingError: wrong dtype or shape.
        """
        events, offsets = self.count_flat(frames)
        return np.split(events, offsets[1:-1].astype(np.intp)) if len(offsets) > 1 else []

    def count_flat(self, frames: Any) -> tuple[np.ndarray, np.ndarray]:
        """Count many frames; the events of all frames in one array.

        :param frames: (n, rows, cols) uint16 array or a list of (rows, cols) uint16 arrays.
        :returns: (events, offsets): frame i's events are ``events[offsets[i]:offsets[i + 1]]``.
        :raises CountingError: wrong dtype or shape.
        """
        return self._batch.count(_frames(frames, self._calibration.shape))


def count_frame(
    frame: np.ndarray,
    *,
    background_threshold: float,
    x_ray_threshold: float = float("inf"),
    dark_reference: Any = None,
    gain: Any = None,
) -> np.ndarray:
    """Count one frame, like ``stempy.image.electron_count_frame`` (build a :class:`Counter` to
    count many).

    :returns: ascending flat indices of the events (uint32).
    :raises CountingError: bad input.
    """
    frame = _frame(frame, None)
    counter = Counter(
        frame.shape,
        background_threshold=background_threshold,
        x_ray_threshold=x_ray_threshold,
        dark_reference=dark_reference,
        gain=gain,
    )
    return counter.count(frame)


__all__ = [
    "STATISTICS_FIELDS",
    "Counter",
    "CountingError",
    "ThresholdStatistics",
    "calculate_thresholds",
    "count_frame",
    "given_thresholds",
    "make_calibration",
    "statistics_dict",
    "thresholds_for_scan",
]
