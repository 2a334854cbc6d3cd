"""Pipeline: what counting costs the whole pipeline, and what the NodeGroups hold, in one run.

One ``SCAN`` scan at the configured geometry through the local stack (bench/stack_run.py: four
producer daemons, the aggregator, two NodeGroup ranks), from the acquisition request to the HDF5
file on disk, in three variants run interleaved ``ROUNDS`` times: NodeGroups that only assemble
(``sectorflow nodegroup --no-counting``), and NodeGroups that count at 20 and at 200 electrons per
frame (``[simulator] dose_per_frame``). Beside frames per second, the peak resident memory
(VmHWM) of each NodeGroup rank: with frames assembled by holding their received sectors it
follows the sectors in flight, not a preallocated pool of ``[nodegroup] pool_frames`` frames.
And the profile that explains the ratio: CPU milliseconds per frame of the NodeGroup ranks and of
every service, and the cores they kept busy. On a machine whose cores the whole stack shares, the
rate is about (cores busy) / (CPU per frame), so counting costs the pipeline what it adds to the
CPU per frame.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

from bench import BenchmarkResult, RunOptions, Target
from bench.ratios import median, ratio
from bench.stack_run import StackScan, run_stack_scan
from sectorflow.configs import Config

log = logging.getLogger(__name__)

DESCRIPTION = "whole pipeline, counting off vs on at 20 and 200 e/frame: frames/s and NodeGroup peak memory"

SCAN = (128, 128)  # long enough that a scan's fixed costs (thresholds, gather, file) weigh little
ROUNDS = 3
TARGET = 0.90  # counting on at 20 e/frame keeps at least this share of the counting-off rate
VARIANTS = {  # name -> (counting, dose per frame)
    "counting off": (False, 20.0),
    "counting on, 20 e/frame": (True, 20.0),
    "counting on, 200 e/frame": (True, 200.0),
}


def nodegroup_peak_mib(scan: StackScan) -> float:
    """The largest peak RSS of the NodeGroup ranks, MiB."""
    peaks = [kib for name, kib in scan.peak_rss_kib.items() if name.startswith("nodegroup")]
    return max(peaks) / 1024 if peaks else 0.0


def cpu_ms_per_frame(scan: StackScan, prefix: str = "") -> float:
    """CPU milliseconds per frame of the services whose name starts with ``prefix`` (all by default)."""
    return 1000.0 * sum(s for name, s in scan.cpu_s.items() if name.startswith(prefix)) / max(scan.frames, 1)


def cores_busy(scan: StackScan) -> float:
    """Every service's CPU seconds from request to file over that time."""
    return sum(scan.cpu_s.values()) / scan.seconds_to_file if scan.seconds_to_file > 0 else 0.0


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Every variant ROUNDS times, interleaved; see the module docstring."""
    runs: dict[str, list[StackScan]] = {name: [] for name in VARIANTS}
    for round_index in range(1 if options.quick else ROUNDS):
        for name, (counting, dose) in VARIANTS.items():
            variant = dataclasses.replace(config, simulator=dataclasses.replace(config.simulator, dose_per_frame=dose))
            with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as work:
                log.info("round %d: %s", round_index + 1, name)
                runs[name].append(run_stack_scan(variant, *SCAN, Path(work), counting=counting))
    rates = {name: median(r.frames_per_s for r in scans) for name, scans in runs.items()}
    off = rates["counting off"]
    rows = []
    for name, scans in runs.items():
        rows.append([name, rates[name], min(r.frames_per_s for r in scans), max(r.frames_per_s for r in scans),
                     ratio(rates[name], off), median(r.events_per_frame for r in scans),
                     max(nodegroup_peak_mib(r) for r in scans),
                     median(cpu_ms_per_frame(r, "nodegroup") for r in scans), median(cpu_ms_per_frame(r) for r in scans),
                     median(cores_busy(r) for r in scans), all(r.complete == r.frames for r in scans)])
    share = ratio(rates["counting on, 20 e/frame"], off)
    per_round = [ratio(on.frames_per_s, no.frames_per_s)
                 for on, no in zip(runs["counting on, 20 e/frame"], runs["counting off"])]
    d = config.detector
    notes = [
        f"{SCAN[0]} x {SCAN[1]} scan of {d.frame_rows} x {d.frame_cols} frames in {config.n_receivers} sectors; "
        f"{ROUNDS if not options.quick else 1} round(s), variants interleaved; frames/s from the acquisition request "
        "to the HDF5 file on disk (the stack's start-up not counted); medians, min and max over the rounds.",
        f"counting on at 20 e/frame / counting off = {share:.2f}; round by round "
        + ", ".join(f"{r:.2f}" for r in per_round),
        f"NodeGroup peak = the largest VmHWM of the 2 NodeGroup ranks (each holds its NodeGroup's frames in "
        f"assembly, at most [nodegroup] pool_frames = {config.nodegroup.pool_frames} of them, and its MPI, "
        "Python and kvstore client).",
        "CPU ms/frame: user + system CPU of the services from the request to the file, per frame (NodeGroup: both "
        "ranks; all: kvstore, aggregator, producers and NodeGroups); cores busy: all of it over that time. "
        "Expected ratio from CPU alone (counting off's all-CPU per frame / counting on's at 20 e/frame): "
        f"{ratio(rows[0][8], rows[1][8]):.2f}.",
    ]
    details = {name: [dataclasses.asdict(r) for r in scans] for name, scans in runs.items()}
    targets = [Target("pipeline: counting on (20 e/frame) vs counting off, frames/s", f">= {TARGET:.2f}",
                      f"{share:.2f}", share >= TARGET)]
    return BenchmarkResult(
        columns=["variant", "frames/s (median)", "frames/s min", "frames/s max", "/ counting off", "events/frame",
                 "NodeGroup peak MiB", "NodeGroup CPU ms/frame", "all CPU ms/frame", "cores busy",
                 "every frame complete"],
        rows=rows, notes=notes, details=details, targets=targets,
    )


def plot(result: BenchmarkResult, path: Path) -> None:
    """Frames per second and NodeGroup peak memory per variant."""
    from bench.plots import figure

    names = [row[0] for row in result.rows]
    with figure(path, 2, "whole pipeline: counting off vs on") as (left, right):
        left.bar(names, [row[1] for row in result.rows])
        left.set_ylabel("frames/s (median)")
        right.bar(names, [row[6] for row in result.rows])
        right.set_ylabel("NodeGroup peak RSS, MiB")
        for axes in (left, right):
            axes.tick_params(axis="x", labelrotation=15)
