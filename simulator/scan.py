"""Run a whole simulated scan: every sector of every frame, optionally into raw v5 files."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sectorflow._core.simulator import Pacer, Simulator
from sectorflow.errors import SectorflowError, UsageError
from sectorflow.protocol import DataHeader, RawFileWriter

log = logging.getLogger(__name__)

# The raw v5 header stores scan sides as uint16.
MAX_SCAN_SIDE = 65535
_SCAN_SHAPE = re.compile(r"(\d+)x(\d+)")


@dataclass(frozen=True)
class ScanSummary:
    """What ``simulate_scan`` did."""

    scan_number: int
    scan_x: int
    scan_y: int
    n_sectors: int
    frames: int
    sectors_generated: int
    sectors_dropped: int
    bytes: int
    """payload bytes generated (dropped sectors are not generated)"""
    seconds: float
    electrons: int
    """electrons placed over all frames (ground truth)"""
    files: tuple[str, ...] = ()
    """raw files written, sorted by sector"""

    @property
    def gb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else float("inf")

    @property
    def mean_electrons_per_frame(self) -> float:
        return self.electrons / self.frames if self.frames else 0.0

    def describe(self) -> str:
        """One line for people: frames, bytes, rate, dose, dropped sectors."""
        return (
            f"scan {self.scan_number}: {self.frames} frames ({self.scan_x} x {self.scan_y}) of "
            f"{self.n_sectors} sectors, {self.bytes / 1e6:.2f} MB in {self.seconds:.3f} s "
            f"({self.gb_per_s:.2f} GB/s), {self.mean_electrons_per_frame:.2f} electrons per frame, "
            f"{self.sectors_dropped} sectors dropped"
        )


def parse_scan_shape(text: str) -> tuple[int, int]:
    """Parse "XxY" (probe positions per row x rows) into ``(x, y)``.

    Raises SectorflowError unless both are integers from 1 to 65535.
    """
    match = _SCAN_SHAPE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"scan shape {text!r}: expected XxY with two positive integers, e.g. 128x128")
    x, y = int(match[1]), int(match[2])
    if not (1 <= x <= MAX_SCAN_SIDE and 1 <= y <= MAX_SCAN_SIDE):
        raise UsageError(f"scan shape {text!r}: both sides must be from 1 to {MAX_SCAN_SIDE}, e.g. 128x128")
    return x, y


def simulate_scan(
    simulator: Simulator,
    scan_number: int,
    scan_x: int,
    scan_y: int,
    *,
    out_dir: str | Path | None = None,
    thread_id: int = 0,
    first_frame: int = 0,
    pacer: Pacer | None = None,
    progress_interval_s: float = 2.0,
) -> ScanSummary:
    """Generate every sector of a scan, frame by frame in scan order, skipping dropped sectors.

    The frame at flat probe position p sits at (p % scan_x, p // scan_x). With ``out_dir``, the
    sectors go to raw v5 files ``data_scan{scan_number:010d}_module{sector}_{thread_id}.data``
    there, one per sector (dropped sectors are missing from them, as UDP losses would be), each
    record under frame number ``first_frame`` + p, the detector's counter. ``pacer`` paces frames;
    progress is logged every ``progress_interval_s`` seconds.

    Raises SectorflowError for a bad scan number, shape or first frame, RawFileError if a file
    cannot be created (it exists already, say) or written.
    """
    if not 0 <= scan_number <= 0xFFFFFFFF:
        raise SectorflowError(f"scan number {scan_number}: expected 0 to {0xFFFFFFFF}")
    if not (1 <= scan_x <= MAX_SCAN_SIDE and 1 <= scan_y <= MAX_SCAN_SIDE):
        raise SectorflowError(f"scan shape {scan_x} x {scan_y}: both sides must be from 1 to {MAX_SCAN_SIDE}")
    if not 0 <= first_frame <= 0xFFFFFFFF - (scan_x * scan_y - 1):
        raise SectorflowError(f"first frame {first_frame} + {scan_x * scan_y} positions - 1 exceeds the largest "
                              f"frame number, {0xFFFFFFFF} ([simulator] first_frame)")
    geometry = simulator.geometry
    n_sectors = geometry.n_sectors
    frames = scan_x * scan_y
    buffer = np.empty((geometry.sector_rows, geometry.sector_cols), dtype=f"uint{8 * geometry.itemsize}")
    generated = dropped = electrons = 0
    log.info(
        "scan %d: simulating %d x %d frames of %d sectors%s",
        scan_number, scan_x, scan_y, n_sectors, f" into {out_dir}" if out_dir is not None else "",
    )
    with contextlib.ExitStack() as stack:
        writers = []
        if out_dir is not None:
            writers = [
                stack.enter_context(RawFileWriter(out_dir, scan_number, sector, thread_id, geometry))
                for sector in range(n_sectors)
            ]
        start = last_report = time.perf_counter()
        if pacer is not None:
            pacer.restart()
        for frame in range(frames):
            if pacer is not None:
                pacer.wait(frame)
            electrons += simulator.electron_count(scan_number, frame, scan_x=scan_x)
            position_x, position_y = frame % scan_x, frame // scan_x
            for sector in range(n_sectors):
                if simulator.dropped(scan_number, frame, sector):
                    dropped += 1
                    continue
                simulator.generate_sector(scan_number, frame, sector, buffer, scan_x=scan_x)
                generated += 1
                if writers:
                    header = DataHeader(
                        scan_number=scan_number, frame_number=first_frame + frame, sector=sector, scan_x=scan_x,
                        scan_y=scan_y, position_x=position_x, position_y=position_y, thread_id=thread_id,
                    )
                    writers[sector].write(header, buffer)
            now = time.perf_counter()
            if now - last_report >= progress_interval_s:
                last_report = now
                log.info(
                    "scan %d: %d of %d frames (%.1f%%), %.2f GB/s",
                    scan_number, frame + 1, frames, 100.0 * (frame + 1) / frames,
                    generated * geometry.sector_bytes / (now - start) / 1e9,
                )
        files = tuple(writer.path for writer in writers)
    seconds = time.perf_counter() - start
    summary = ScanSummary(
        scan_number=scan_number, scan_x=scan_x, scan_y=scan_y, n_sectors=n_sectors, frames=frames,
        sectors_generated=generated, sectors_dropped=dropped, bytes=generated * geometry.sector_bytes,
        seconds=seconds, electrons=electrons, files=files,
    )
    return summary
