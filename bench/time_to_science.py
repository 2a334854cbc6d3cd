"""Time to science: the same simulated scan through the streaming pipeline (acquisition request to
counted HDF5 file on disk, the local stack of the configuration, bench/stack_run.py) and through
the file workflow it replaces (raw files with fsync, then stempy reads, counts and saves:
bench/file_workflow.py), one after the other in one run. The paper measured 13x for 10 GB scans at
its facility; here both sides share the same two cores and one disk.

Scans: 128 x 128 (10.9 GB raw), 256 x 256 (43.5 GB raw, about 5 minutes for both workflows here) and
512 x 512 (174 GB raw); ``--quick`` leaves the last two out (``FULL_SCANS``). A file workflow needs
its raw files on disk at once: where the disk has not room for them (512 x 512 needs 174 GB), that
side is estimated from the largest scan measured in the same run (its seconds per raw GB of writing
and of stempy, which both scale with the bytes), the row says so, and the target is judged on
measured rows only.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from bench import BenchmarkResult, RunOptions, Table, Target
from bench.file_workflow import FileWorkflowTiming, run_file_workflow
from bench.ratios import ratio
from bench.stack_run import run_stack_scan
from sectorflow.configs import Config

log = logging.getLogger(__name__)

DESCRIPTION = "time from acquisition start to counted HDF5: streaming pipeline vs file workflow (stempy)"

SCANS = [(128, 128)]
FULL_SCANS = [(256, 256), (512, 512)]
TARGET = 8.0  # streaming at least this many times faster than the file workflow, every scan
DISK_MARGIN = 1.1  # room beyond the raw files: the counted file, the streaming side's output, the rest of the disk


def raw_scan_bytes(config: Config, scan_x: int, scan_y: int) -> int:
    """Bytes of a scan's raw files (their headers aside)."""
    geometry = config.geometry()
    return geometry.sector_bytes * geometry.n_sectors * scan_x * scan_y


def estimated_file_workflow(measured: FileWorkflowTiming, raw_bytes: int) -> FileWorkflowTiming:
    """The file workflow of a scan of ``raw_bytes`` at the seconds per byte of a measured one."""
    scale = raw_bytes / measured.raw_bytes
    return FileWorkflowTiming(measured.write_s * scale, measured.count_s * scale, measured.save_s * scale, raw_bytes)


def machine_bound(files_total_s: float, stack_cpu_s: float, cores: int) -> float:
    """The speed-up the streaming side would reach on this machine if it were bound by CPU alone: the
    file workflow's time over the stack's CPU seconds spread evenly over every core. A measured
    speed-up near it says the machine's cores, not a stage's wait, bound the streaming side."""
    return ratio(files_total_s, stack_cpu_s / cores) if stack_cpu_s > 0 else 0.0


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Each scan through both workflows; see the module docstring."""
    cores = os.cpu_count() or 1
    rows = []
    cpu_rows: list[list[object]] = []
    details: dict[str, dict] = {}
    largest: FileWorkflowTiming | None = None
    for scan_x, scan_y in SCANS + ([] if options.quick else FULL_SCANS):
        with tempfile.TemporaryDirectory(prefix="bench-time-to-science-") as work:
            log.info("streaming pipeline, %d x %d", scan_x, scan_y)
            streaming = run_stack_scan(config, scan_x, scan_y, Path(work) / "streaming")
            raw_bytes = raw_scan_bytes(config, scan_x, scan_y)
            free = shutil.disk_usage(work).free
            if raw_bytes * DISK_MARGIN <= free or largest is None:
                log.info("file workflow, %d x %d", scan_x, scan_y)
                files: FileWorkflowTiming = run_file_workflow(config, 1, scan_x, scan_y, Path(work))
                largest, estimated = files, False
            else:
                log.info("file workflow, %d x %d: %.0f GB of raw files, %.0f GB free: estimated from %.1f GB",
                         scan_x, scan_y, raw_bytes / 1e9, free / 1e9, largest.raw_bytes / 1e9)
                files, estimated = estimated_file_workflow(largest, raw_bytes), True
        speedup = ratio(files.total_s, streaming.seconds_to_file)
        stack_cpu_s = sum(streaming.cpu_s.values())
        bound = machine_bound(files.total_s, stack_cpu_s, cores)
        label = f"{scan_x} x {scan_y}" + (" (files estimated)" if estimated else "")
        rows.append([label, files.raw_bytes / 1e9, files.write_s, files.count_s + files.save_s,
                     files.total_s, streaming.seconds_to_file, streaming.frames_per_s, speedup, bound])
        gb = streaming.raw_bytes / 1e9
        cpu_rows += [[label, service, seconds, seconds / gb, f"{seconds / stack_cpu_s:.0%}"]
                     for service, seconds in sorted(streaming.cpu_s.items(), key=lambda item: -item[1])]
        cpu_rows.append([label, "the whole stack", stack_cpu_s, stack_cpu_s / gb, "100%"])
        details[f"{scan_x}x{scan_y}"] = {
            "file_workflow": {"write_s": files.write_s, "count_s": files.count_s, "save_s": files.save_s,
                              "total_s": files.total_s, "raw_bytes": files.raw_bytes},
            "streaming": {"seconds_to_file": streaming.seconds_to_file, "frames_per_s": streaming.frames_per_s,
                          "complete": streaming.complete, "incomplete": streaming.incomplete,
                          "missing": streaming.missing},
            "speedup": speedup,
            "stack_cpu_s": dict(streaming.cpu_s),
            "machine_bound": bound,
            "file_workflow_estimated": estimated,
        }
    notes = [
        "file workflow: simulate + write raw version-5 files (one per sector) + fsync, then stempy 3.6.0 "
        "(multi-pass reader, electron_count with thresholds from the scan, save_electron_counts).",
        f"streaming: the local stack ({config.n_receivers} producer daemons, aggregator, 2 NodeGroup ranks), from "
        "the acquisition request to the HDF5 file on disk; the stack's start-up (about 5 s) is not counted, as a "
        "streaming session runs before the acquisition.",
        "--quick: the 256 x 256 and 512 x 512 scans were left out" if options.quick
        else "the file workflow's raw files are simulated and written by one process per sector, as many at once as "
             "there are cores (the streaming side has four producer processes); both run on the same cores.",
    ]
    notes.append(f"bound on this machine: the file workflow's time over the stack's CPU seconds (every service "
                 f"process, from the request to the file) spread over all {cores} cores, the speed-up if the "
                 "streaming side were bound by CPU alone; the CPU table below gives each service's share. At a "
                 "beamline each service has cores of its own (bench transport's full-detector table).")
    if any(d["file_workflow_estimated"] for d in details.values()):
        notes.append("a scan marked 'files estimated' had not room on this disk for its raw files: its file workflow "
                     "is the largest measured scan's, scaled by raw bytes; the target is judged on measured scans")
    measured = [d["speedup"] for d in details.values() if not d["file_workflow_estimated"]]
    return BenchmarkResult(
        columns=["scan", "raw GB", "files: write s", "files: stempy count + save s", "files: total s",
                 "streaming: s to file", "streaming: frames/s", "speed-up", "bound on this machine"],
        rows=rows, notes=notes, details=details,
        tables=[Table("streaming: CPU of each service from the request to the file",
                      ["scan", "service", "CPU s", "CPU-s/GB", "share"], cpu_rows)],
        targets=[Target("time to science: streaming vs file workflow (stempy), slowest scan", f">= {TARGET:.0f}x",
                        f"{min(measured):.1f}x", min(measured) >= TARGET)],
    )


def plot(result: BenchmarkResult, path: Path) -> None:
    """Seconds to the counted file per scan: file workflow (write, stempy stacked) vs streaming."""
    import numpy as np

    from bench.plots import figure

    scans = list(result.details)
    with figure(path, 1, "time to science: acquisition start to counted HDF5 on disk") as (axes,):
        xs = np.arange(len(scans))
        write = [result.details[s]["file_workflow"]["write_s"] for s in scans]
        stempy = [result.details[s]["file_workflow"]["count_s"] + result.details[s]["file_workflow"]["save_s"]
                  for s in scans]
        streaming = [result.details[s]["streaming"]["seconds_to_file"] for s in scans]
        axes.bar(xs - 0.2, write, 0.4, label="files: write + fsync")
        axes.bar(xs - 0.2, stempy, 0.4, bottom=write, label="files: stempy count + save")
        axes.bar(xs + 0.2, streaming, 0.4, label="streaming pipeline")
        for x, scan in zip(xs, scans):
            axes.annotate(f"{result.details[scan]['speedup']:.1f}x", (x + 0.2, streaming[int(x)]),
                          ha="center", va="bottom")
        axes.set_xticks(xs, [s.replace("x", " x ") for s in scans])
        axes.set_ylabel("seconds")
        axes.legend()
