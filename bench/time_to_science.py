"""Time to science: the same simulated scan through the streaming pipeline (acquisition request to
counted HDF5 file on disk, the local stack of the configuration, bench/stack_run.py) and through
the file workflow it replaces (raw files with fsync, then stempy reads, counts and saves:
bench/file_workflow.py), one after the other in one run. The paper measured 13x for 10 GB scans at
its facility; here both sides share the same two cores and one disk.

Both scans of the target run: 128 x 128 (10.9 GB raw) and 256 x 256 (43.5 GB raw, about 5 minutes
for both workflows here); ``--quick`` leaves the second out (``FULL_SCANS``).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from bench import BenchmarkResult, RunOptions, Target
from bench.file_workflow import FileWorkflowTiming, run_file_workflow
from bench.ratios import ratio
from bench.stack_run import run_stack_scan
from sectorflow.configs import Config

log = logging.getLogger(__name__)

DESCRIPTION = "time from acquisition start to counted HDF5: streaming pipeline vs file workflow (stempy)"

SCANS = [(128, 128)]
FULL_SCANS = [(256, 256)]
TARGET = 6.0  # issue 17: streaming at least this many times faster than the file workflow, every scan


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Each scan through both workflows; see the module docstring."""
    rows = []
    details: dict[str, dict] = {}
    for scan_x, scan_y in SCANS + ([] if options.quick else FULL_SCANS):
        with tempfile.TemporaryDirectory(prefix="bench-time-to-science-") as work:
            log.info("streaming pipeline, %d x %d", scan_x, scan_y)
            streaming = run_stack_scan(config, scan_x, scan_y, Path(work) / "streaming")
            log.info("file workflow, %d x %d", scan_x, scan_y)
            files: FileWorkflowTiming = run_file_workflow(config, 1, scan_x, scan_y, Path(work))
        speedup = ratio(files.total_s, streaming.seconds_to_file)
        rows.append([f"{scan_x} x {scan_y}", files.raw_bytes / 1e9, files.write_s, files.count_s + files.save_s,
                     files.total_s, streaming.seconds_to_file, streaming.frames_per_s, speedup])
        details[f"{scan_x}x{scan_y}"] = {
            "file_workflow": {"write_s": files.write_s, "count_s": files.count_s, "save_s": files.save_s,
                              "total_s": files.total_s, "raw_bytes": files.raw_bytes},
            "streaming": {"seconds_to_file": streaming.seconds_to_file, "frames_per_s": streaming.frames_per_s,
                          "complete": streaming.complete, "incomplete": streaming.incomplete,
                          "missing": streaming.missing},
            "speedup": speedup,
        }
    notes = [
        "file workflow: simulate + write raw version-5 files (one per sector) + fsync, then stempy 3.6.0 "
        "(multi-pass reader, electron_count with thresholds from the scan, save_electron_counts).",
        f"streaming: the local stack ({config.n_receivers} producer daemons, aggregator, 2 NodeGroup ranks), from "
        "the acquisition request to the HDF5 file on disk; the stack's start-up (about 5 s) is not counted, as a "
        "streaming session runs before the acquisition.",
        "--quick: the 256 x 256 scan (43.5 GB) was left out" if options.quick
        else "the file workflow's raw files are simulated and written by one process per sector, as many at once as "
             "there are cores (the streaming side has four producer processes); both run on the same cores.",
    ]
    return BenchmarkResult(
        columns=["scan", "raw GB", "files: write s", "files: stempy count + save s", "files: total s",
                 "streaming: s to file", "streaming: frames/s", "speed-up"],
        rows=rows, notes=notes, details=details,
        targets=[Target("time to science: streaming vs file workflow (stempy), slowest scan", f">= {TARGET:.0f}x",
                        f"{min(r[-1] for r in rows):.1f}x", min(r[-1] for r in rows) >= TARGET)],
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
