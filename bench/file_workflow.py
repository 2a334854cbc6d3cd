"""The file workflow sectorflow replaces, timed end to end: the receivers write the scan to raw
files (fsync'd, as a transfer would need), then stempy 3.6.0 reads them, counts electrons and saves
the counted HDF5 file. The streaming side of the comparison is bench/time_to_science.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sectorflow.configs import Config
from sectorflow.protocol import DataHeader, RawFileWriter, find_raw_files
from sectorflow.simulator import simulator_from_config


@dataclass(frozen=True)
class FileWorkflowTiming:
    write_s: float  # simulate + write + fsync the raw files
    count_s: float  # stempy: read, threshold, count
    save_s: float  # stempy: save the counted HDF5
    raw_bytes: int

    @property
    def total_s(self) -> float:
        return self.write_s + self.count_s + self.save_s


def write_sector(config: Config, scan: int, scan_x: int, scan_y: int, sector: int, directory: str) -> int:
    """One receiver's part: sector ``sector`` of every frame as a raw v5 file, fsync'd; returns its bytes."""
    simulator = simulator_from_config(config)
    geometry = config.geometry()
    buffer = np.empty(geometry.sector_bytes, dtype=np.uint8)
    writer = RawFileWriter(directory, scan, sector, 0, geometry)
    try:
        for frame in range(scan_x * scan_y):
            simulator.generate_sector(scan, frame, sector, buffer, scan_x=scan_x)  # a specimen places frames by it
            header = DataHeader(scan_number=scan, frame_number=frame, sector=sector, scan_x=scan_x,
                                scan_y=scan_y, position_x=frame % scan_x, position_y=frame // scan_x)
            writer.write(header, buffer)
    finally:
        writer.close()
    return buffer.nbytes * scan_x * scan_y


def write_raw_scan(config: Config, scan: int, scan_x: int, scan_y: int, directory: Path) -> int:
    """Write a simulated scan as raw v5 files, one per sector, as the receivers would: one process
    per sector, as many at once as there are cores; every file fsync'd. Returns the bytes written."""
    sectors = range(config.geometry().n_sectors)
    with ProcessPoolExecutor(max_workers=min(len(sectors), os.cpu_count() or 1)) as pool:
        written = sum(pool.map(write_sector, [config] * len(sectors), [scan] * len(sectors), [scan_x] * len(sectors),
                               [scan_y] * len(sectors), sectors, [str(directory)] * len(sectors)))
    for path in find_raw_files(str(directory), scan):
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    return written


def run_file_workflow(config: Config, scan: int, scan_x: int, scan_y: int, workdir: Path | None = None) -> FileWorkflowTiming:
    """Time the file workflow on a simulated scan; the files are removed afterwards."""
    import stempy.image
    import stempy.io

    directory = Path(tempfile.mkdtemp(prefix="file-workflow-", dir=workdir))
    try:
        start = time.perf_counter()
        raw_bytes = write_raw_scan(config, scan, scan_x, scan_y, directory)
        written = time.perf_counter()
        files = find_raw_files(str(directory), scan)
        reader = stempy.io.reader(files, stempy.io.FileVersion.VERSION5, backend="multi-pass")
        dark = np.zeros((config.detector.frame_rows, config.detector.frame_cols))
        counted = stempy.image.electron_count(
            reader, darkreference=dark, background_threshold_n_sigma=config.counting.background_sigma,
            xray_threshold_n_sigma=config.counting.xray_sigma, scan_dimensions=(scan_x, scan_y))
        count_done = time.perf_counter()
        stempy.io.save_electron_counts(str(directory / f"counted_{scan}.h5"), counted)
        saved = time.perf_counter()
        return FileWorkflowTiming(written - start, count_done - written, saved - count_done, raw_bytes)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
