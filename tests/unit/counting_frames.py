"""Simulated-like 4D Camera frames for the counting tests: dark ~20 ADU with 2.2 ADU noise and
electrons of a few hundred ADU spread over a 3 x 3 neighbourhood. Independent of the simulator
component on purpose: these tests pin the counting algorithm, not the simulator.
"""

from __future__ import annotations

import numpy as np

# Charge sharing of one electron over its 3 x 3 neighbourhood (sums to 1).
_SPREAD = np.array([[0.04, 0.10, 0.04], [0.10, 0.44, 0.10], [0.04, 0.10, 0.04]])


def simulated_frames(
    n: int,
    shape: tuple[int, int] = (576, 576),
    *,
    electrons_per_frame: float = 200.0,
    dark: np.ndarray | float = 20.0,
    noise_adu: float = 2.2,
    seed: int = 0,
) -> np.ndarray:
    """``n`` uint16 frames: Gaussian dark noise around ``dark`` plus Poisson-many electrons."""
    rng = np.random.default_rng(seed)
    rows, cols = shape
    frames = rng.normal(dark, noise_adu, size=(n, rows, cols))
    for frame in frames:
        count = rng.poisson(electrons_per_frame)
        r = rng.integers(0, rows, count)
        c = rng.integers(0, cols, count)
        adu = rng.uniform(150.0, 450.0, count)
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                rr, cc = r + dr, c + dc
                inside = (rr >= 0) & (rr < rows) & (cc >= 0) & (cc < cols)
                np.add.at(frame, (rr[inside], cc[inside]), adu[inside] * _SPREAD[dr + 1, dc + 1])
    return np.clip(np.rint(frames), 0, 65535).astype(np.uint16)


def dark_map(shape: tuple[int, int], mean: float = 20.0, spread: float = 1.0, seed: int = 1) -> np.ndarray:
    """A float32 dark reference with per-pixel offsets around ``mean``."""
    rng = np.random.default_rng(seed)
    return rng.normal(mean, spread, size=shape).astype(np.float32)


def gain_map(shape: tuple[int, int], seed: int = 2) -> np.ndarray:
    """A float32 gain map (stempy's meaning: pixels are divided by it) around 1."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0.85, 1.15, size=shape).astype(np.float32)
