"""Rank 0's threshold exchange: a scan's thresholds are fitted once from the union of its NodeGroups'
samples (the statistics of all their frames), when every NodeGroup sampled or half the wait after
the first sample; a late NodeGroup is answered with the same thresholds; a sample that cannot be
fitted gives nobody thresholds (each NodeGroup decides from its own)."""

from __future__ import annotations

import numpy as np

from sectorflow.consumer.counting import SampleHistogram, calculate_thresholds
from sectorflow.consumer.nodegroup.threshold_exchange import ThresholdExchange, statistics_from_dict

SIGMAS = {"background_threshold_n_sigma": 4.5, "x_ray_threshold_n_sigma": 175.0}


def histogram(frames: np.ndarray) -> SampleHistogram:
    """The histogram a NodeGroup's sampler hands over for these uncorrected frames."""
    values = frames.astype(np.int64).ravel()
    low = int(values.min())
    sample = SampleHistogram.__new__(SampleHistogram)
    sample.__setstate__((len(frames), values.size, low, int(values.sum()),
                         [int(c) for c in np.bincount(values - low)]))
    return sample


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def frames(seed: int, count: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(np.rint(rng.normal(20.0, 2.1, (count, 16, 16))), 0, None).astype(np.uint16)


def test_the_scans_thresholds_are_those_of_all_its_nodegroups_frames() -> None:
    a, b = frames(1, 3), frames(2, 4)
    exchange = ThresholdExchange(["ng-a", "ng-b"], 4.5, 175.0, share_s=1.0, clock=Clock())
    exchange.add(7, "ng-a", histogram(a))
    assert exchange.due() == []  # ng-b has not sampled yet, and the wait has just begun
    exchange.add(7, "ng-b", histogram(b))
    [(scan, decided)] = exchange.due()
    whole = calculate_thresholds(np.concatenate([a, b]), **SIGMAS)
    assert scan == 7
    assert decided["number_of_samples"] == 7
    assert decided["background_threshold"] == whole.background_threshold
    assert decided["x_ray_threshold"] == whole.x_ray_threshold
    assert statistics_from_dict(decided).optimized_std_dev == whole.optimized_std_dev


def test_a_missing_nodegroup_is_waited_for_half_the_wait_and_answered_when_it_comes() -> None:
    clock = Clock()
    exchange = ThresholdExchange(["ng-a", "ng-b"], 4.5, 175.0, share_s=1.0, clock=clock)
    exchange.add(3, "ng-a", histogram(frames(1, 2)))
    clock.now += 0.49
    assert exchange.due() == []
    clock.now += 0.02
    [(scan, decided)] = exchange.due()
    assert scan == 3 and decided["number_of_samples"] == 2
    assert exchange.due() == []
    exchange.add(3, "ng-b", histogram(frames(2, 2)))  # late: the scan's thresholds stand
    assert exchange.due() == [(3, decided)]


def test_samples_without_noise_give_no_thresholds(caplog) -> None:
    flat = np.full((2, 16, 16), 20, dtype=np.uint16)
    exchange = ThresholdExchange(["ng-a"], 4.5, 175.0, share_s=1.0, clock=Clock())
    exchange.add(5, "ng-a", histogram(flat))
    assert exchange.due() == []
    assert "scan 5: no shared thresholds" in caplog.text and "each decides from its own" in caplog.text
