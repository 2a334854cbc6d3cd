"""The cost of the virtual images on the counting rate. A NodeGroup's counting thread counts a
frame, then images it with the built-in kernels (consumer/nodegroup/kernels/: per electron a
look-up of the detectors its pixel lies in and a count per detector, then the centre-of-mass
sums) and one increment of the summed diffraction pattern per electron (virtual_images.hpp), with
the configured [[analysis.virtual_detectors]]. Both are timed here
on one thread on the same 576 x 576 frames as the counting benchmark, per scenario; the cost is
images / counting, the fraction by which the images lower the counting rate of a thread.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from bench import BenchmarkResult, RunOptions, Target
from bench.counting import FRAMES, MIN_REPEAT_S, SAMPLE, SCENARIOS, SHAPE, best_time, simulated_frames
from sectorflow.analysis import detectors_from
from sectorflow.configs import Config
from sectorflow.consumer.counting import Counter, calculate_thresholds
from sectorflow.consumer.nodegroup import virtual_images

log = logging.getLogger(__name__)

DESCRIPTION = "cost of the virtual images on the counting rate, one thread, 576 x 576 frames"
TARGET_COST = 0.05  # the images may cost at most 5% of the counting rate
# Frames imaged per call: the counted frames repeated, so that what a call costs once (the summed
# pattern's allocation and its copy to numpy) weighs as little as it does in a NodeGroup, which
# allocates the pattern once per scan and counting thread.
IMAGED_FRAMES = 8192


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Time counting and imaging of each scenario's frames; see the module docstring."""
    rng = np.random.default_rng(config.simulator.seed)
    dark = rng.normal(20.0, 1.0, size=SHAPE).astype(np.float32)
    if (config.detector.frame_rows, config.detector.frame_cols) != SHAPE or not config.analysis.virtual_images:
        raise SystemExit(f"virtual_images: the configuration's detector must be {SHAPE[0]} x {SHAPE[1]} with "
                         "[analysis] virtual_images on (the frames are bench.counting's)")
    detectors = detectors_from(config)
    shown = ", ".join(f"{d.name} ({d.kind})" for d in detectors.detectors)
    rows = []
    for electrons, with_gain in SCENARIOS:
        if with_gain:
            continue  # the gain changes the counting, not the imaging: the scenarios without cover it
        frames = simulated_frames(rng, FRAMES, dark, electrons)
        statistics = calculate_thresholds(frames[:SAMPLE], dark_reference=dark,
                                          background_threshold_n_sigma=config.counting.background_sigma,
                                          x_ray_threshold_n_sigma=config.counting.xray_sigma)
        counter = Counter.from_thresholds(statistics, SHAPE, dark_reference=dark, threads=1)
        events, offsets = counter.count_flat(frames)
        counting_s = best_time(lambda: counter.count_flat(frames), FRAMES, MIN_REPEAT_S)
        repeats = IMAGED_FRAMES // FRAMES
        sizes = np.diff(offsets)
        tiled_events = np.tile(events, repeats)
        tiled_offsets = np.concatenate([[0], np.cumsum(np.tile(sizes, repeats))]).astype(np.uint64)
        imaging_s = best_time(lambda: virtual_images(detectors, SHAPE[0], SHAPE[1], tiled_events, tiled_offsets),
                              repeats * FRAMES, MIN_REPEAT_S)
        cost = imaging_s / counting_s
        rows.append([f"{electrons} e/frame", float(len(events)) / FRAMES, 1.0 / counting_s, 1.0 / imaging_s,
                     1.0 / (counting_s + imaging_s), 100.0 * cost])
        log.info("%d e/frame: counting %.0f, imaging %.0f frames/s: %.2f%%", electrons, 1 / counting_s,
                 1 / imaging_s, 100 * cost)
    worst = max(rows, key=lambda row: row[5])
    notes = [
        f"{FRAMES} frames of {SHAPE[0]} x {SHAPE[1]} per scenario (bench.counting's), counted by Counter.count_flat on "
        f"1 thread; their events imaged {IMAGED_FRAMES // FRAMES} times over in one call by sectorflow.consumer.nodegroup.virtual_images (the NodeGroup's C++ code, VirtualImages::add per "
        "frame, which also copies each frame's events once) with the configured "
        f"[[analysis.virtual_detectors]] ({shown}); best of the repetitions.",
        "cost = imaging time / counting time: how much slower a counting thread counts with the images on.",
        "the machine is shared with other work: the load average above says how busy it was.",
    ]
    targets = [Target(f"virtual images' cost on the counting rate, worst scenario ({worst[0]})",
                      f"<= {100 * TARGET_COST:.0f}%", f"{worst[5]:.2f}%", worst[5] <= 100 * TARGET_COST)]
    columns = ["scenario", "events/frame", "counting frames/s", "imaging frames/s", "both frames/s", "cost %"]
    return BenchmarkResult(columns=columns, rows=rows, notes=notes, details={"frames": FRAMES}, targets=targets)


def plot(result: BenchmarkResult, path: Path) -> None:
    """Frames/s of one counting thread with and without the images, per scenario."""
    from bench.plots import figure

    labels = [row[0] for row in result.rows]
    with figure(path, 1, "virtual images' cost on counting (1 thread, 576 x 576)") as (axis,):
        xs = np.arange(len(labels))
        axis.bar(xs - 0.2, [row[2] for row in result.rows], 0.4, label="counting")
        axis.bar(xs + 0.2, [row[4] for row in result.rows], 0.4, label="counting + virtual images")
        axis.set_xticks(xs, labels)
        axis.set_ylabel("frames/s, 1 thread")
        axis.set_yscale("log")
        axis.legend()
