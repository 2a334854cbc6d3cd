"""Scaling: the whole pipeline's throughput with 1, 2 and 4 NodeGroups and 1, 2 and 4 producer
threads per receiver, every combination, one ``SCAN`` scan each through the local stack
(bench/stack_run.py), frames per second from the acquisition request to the counted HDF5 file.

The variants are the configuration with ``[[receivers]] threads`` and ``[nodegroup]
groups_per_rank`` replaced (``dataclasses.replace``), written to a file the services load. N
NodeGroups run as ``min(N, 2)`` MPI ranks of ``N / ranks`` groups each: one rank per node is the
deployment, and this machine is one node of two cores. On two cores every service competes for
the same two cores, so the figures show the cost of more threads and groups here, not the gain
they bring on separate receiver servers and compute nodes.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

from bench import BenchmarkResult, RunOptions
from bench.ratios import ratio
from bench.stack_run import run_stack_scan
from sectorflow.configs import Config

log = logging.getLogger(__name__)

DESCRIPTION = "pipeline throughput with 1, 2, 4 NodeGroups x 1, 2, 4 producer threads per receiver, frames/s"

NODEGROUPS = (1, 2, 4)
PRODUCER_THREADS = (1, 2, 4)
SCAN = (64, 64)  # 4096 frames, 2.7 GB raw per run


def layout(nodegroups: int) -> tuple[int, int]:
    """(MPI ranks, NodeGroups per rank) that make ``nodegroups`` NodeGroups on this one node."""
    ranks = min(nodegroups, 2)
    if nodegroups % ranks:
        raise ValueError(f"{nodegroups} NodeGroups do not split over {ranks} ranks")
    return ranks, nodegroups // ranks


def variant(config: Config, nodegroups: int, threads: int) -> tuple[Config, int]:
    """The configuration with ``threads`` producer threads per receiver and the groups per rank of
    ``nodegroups`` NodeGroups; returns it and the number of ranks."""
    ranks, per_rank = layout(nodegroups)
    return dataclasses.replace(
        config,
        receivers=tuple(dataclasses.replace(r, threads=threads) for r in config.receivers),
        nodegroup=dataclasses.replace(config.nodegroup, groups_per_rank=per_rank),
    ), ranks


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Every combination once, in a fresh stack each; see the module docstring."""
    scan_x, scan_y = SCAN
    rows = []
    runs = []
    for nodegroups in NODEGROUPS:
        for threads in PRODUCER_THREADS:
            changed, ranks = variant(config, nodegroups, threads)
            with tempfile.TemporaryDirectory(prefix="bench-scaling-") as work:
                scan = run_stack_scan(changed, scan_x, scan_y, Path(work), ranks=ranks)
            log.info("%d NodeGroups, %d producer threads: %.0f frames/s", nodegroups, threads, scan.frames_per_s)
            runs.append({"nodegroups": nodegroups, "ranks": ranks, "producer_threads": threads,
                         "frames_per_s": scan.frames_per_s, "gb_s": scan.gb_s, "seconds_to_file": scan.seconds_to_file,
                         "raw_bytes": scan.raw_bytes,
                         "complete": scan.complete, "incomplete": scan.incomplete, "missing": scan.missing})
    base = runs[0]["frames_per_s"]
    for r in runs:
        rows.append([r["nodegroups"], f"{r['ranks']} x {r['nodegroups'] // r['ranks']}", r["producer_threads"],
                     r["frames_per_s"], r["gb_s"], ratio(r["frames_per_s"], base), r["seconds_to_file"],
                     f"{r['complete']:,} / {r['incomplete']} / {r['missing']}"])
    best = max(runs, key=lambda r: r["frames_per_s"])
    notes = [
        f"one {scan_x} x {scan_y} scan ({runs[0]['raw_bytes'] / 1e9:.1f} GB raw, "
        f"{config.n_receivers} receivers) per combination, each in a fresh local stack on free ports; time from the "
        "acquisition request to the counted HDF5 file; every service on this machine's cores.",
        f"{config.nodegroup.counting_threads} counting thread(s) per NodeGroup, pool {config.nodegroup.pool_frames} "
        f"frames per NodeGroup, aggregator hwm {config.aggregator.hwm}.",
        f"best: {best['nodegroups']} NodeGroups, {best['producer_threads']} producer threads per receiver: "
        f"{best['frames_per_s']:,.0f} frames/s ({best['gb_s']:.2f} GB/s).",
    ]
    return BenchmarkResult(
        columns=["NodeGroups", "ranks x groups", "producer threads / receiver", "frames/s", "GB/s",
                 "/ (1 NodeGroup, 1 thread)", "s to file", "complete / incomplete / missing"],
        rows=rows, notes=notes, details={"scan": f"{scan_x}x{scan_y}", "runs": runs},
    )


def plot(result: BenchmarkResult, path: Path) -> None:
    """Frames/s against producer threads, one line per NodeGroup count."""
    from bench.plots import figure

    runs = result.details["runs"]
    with figure(path, 1, f"scaling: {result.details['scan']} scans through the local stack") as (axes,):
        for nodegroups in sorted({r["nodegroups"] for r in runs}):
            mine = [r for r in runs if r["nodegroups"] == nodegroups]
            axes.plot([r["producer_threads"] for r in mine], [r["frames_per_s"] for r in mine], marker="o",
                      label=f"{nodegroups} NodeGroup{'s' if nodegroups > 1 else ''}")
        axes.set_xscale("log", base=2)
        axes.set_xticks(list(PRODUCER_THREADS), [str(t) for t in PRODUCER_THREADS])
        axes.set_xlabel("producer threads per receiver")
        axes.set_ylabel("frames/s, acquisition request to HDF5")
        axes.set_ylim(bottom=0)
        axes.legend()
