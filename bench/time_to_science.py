"""Time to science: the same simulated scan through the file workflow (raw files with fsync, then
stempy reads, counts and saves) and through the streaming pipeline (acquisition request to HDF5
file on disk, with the local stack of the configuration), in one run. The paper measured 13x for
10 GB scans at its facility; here both sides share the same two cores.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from bench import BenchmarkResult
from bench.file_workflow import run_file_workflow
from sectorflow.configs import Config
from sectorflow.pipeline.demo import DemoOptions, run_demo

log = logging.getLogger(__name__)

DESCRIPTION = "time from acquisition start to counted HDF5: file workflow (stempy) vs streaming pipeline"

SCANS = [(128, 128), (256, 256)]


def run(config: Config) -> BenchmarkResult:
    rows = []
    details = {}
    for scan_x, scan_y in SCANS:
        with tempfile.TemporaryDirectory(prefix="time-to-science-") as work:
            workdir = Path(work)
            log.info("file workflow, %d x %d", scan_x, scan_y)
            files = run_file_workflow(config, 1, scan_x, scan_y, workdir)
            log.info("streaming pipeline, %d x %d", scan_x, scan_y)
            summary = run_demo(config, DemoOptions(scan_x=scan_x, scan_y=scan_y, run_dir=workdir / "run",
                                                   output_dir=workdir / "counted", png=False))
        ratio = files.total_s / summary.seconds_to_file
        rows.append([f"{scan_x} x {scan_y}", round(files.raw_bytes / 1e9, 2), round(files.write_s, 1),
                     round(files.count_s + files.save_s, 1), round(files.total_s, 1),
                     round(summary.seconds_to_file, 1), round(ratio, 1)])
        details[f"{scan_x}x{scan_y}"] = {"file_workflow": vars(files) | {"total_s": files.total_s},
                                         "streaming_s": summary.seconds_to_file, "ratio": ratio}
    return BenchmarkResult(
        columns=["scan", "raw GB", "files: write s", "files: stempy count+save s", "files: total s",
                 "streaming: total s", "speed-up"],
        rows=rows,
        notes=["file workflow: simulate + write raw v5 files + fsync, then stempy 3.6.0 multi-pass reader, "
               "electron_count (one core) and save_electron_counts",
               "streaming: sectorflow demo stack (kvstore, aggregator, 2 NodeGroup ranks, one producer per "
               "receiver), from the acquisition request to the HDF5 file on disk"],
        details=details,
    )
