"""The summary of one scan through the pipeline, as the demo prints it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sectorflow.configs import Config
from sectorflow.consumer.counting import CountedScan

from sectorflow.live.overview import image_text


@dataclass(frozen=True)
class ScanSummary:
    scan_number: int
    scan_shape: tuple[int, int]  # (rows, cols) of probe positions
    frames: int
    raw_bytes: int
    seconds_to_file: float  # acquisition request to HDF5 file on disk
    events_per_frame: float
    complete: int
    incomplete: int
    missing: int
    h5_path: Path
    png_path: Path | None
    image_lines: tuple[str, ...] = ()  # the file's virtual images as text

    @property
    def throughput_gb_s(self) -> float:
        return self.raw_bytes / self.seconds_to_file / 1e9 if self.seconds_to_file > 0 else 0.0

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.seconds_to_file if self.seconds_to_file > 0 else 0.0

    def lines(self) -> list[str]:
        rows, cols = self.scan_shape
        text = [
            f"scan {self.scan_number}: {cols} x {rows} probe positions, {self.frames} frames, "
            f"{self.raw_bytes / 1e9:.2f} GB raw",
            f"  acquisition start to HDF5 on disk: {self.seconds_to_file:.1f} s "
            f"({self.throughput_gb_s:.2f} GB/s, {self.frames_per_s:.0f} frames/s)",
            f"  electrons per frame: {self.events_per_frame:.1f} (mean)",
            f"  frames complete: {self.complete}, incomplete: {self.incomplete}, missing: {self.missing}",
            f"  counted data: {self.h5_path}",
        ]
        if self.png_path is not None:
            text.append(f"  picture: {self.png_path}")
        return text + list(self.image_lines)


def summarize(config: Config, scan_number: int, counted: CountedScan, h5_path: Path, seconds: float,
              png_path: Path | None) -> ScanSummary:
    """Build the summary of a written scan from its counted file."""
    rows, cols = counted.scan_shape
    present = [e for e in counted.events if e is not None]
    missing = len(counted.missing_positions)
    incomplete = len(counted.incomplete_positions)
    frames = rows * cols
    frame_bytes = config.detector.frame_rows * config.detector.frame_cols * config.detector.itemsize
    return ScanSummary(
        scan_number=scan_number, scan_shape=(rows, cols), frames=frames, raw_bytes=frames * frame_bytes,
        seconds_to_file=seconds,
        events_per_frame=float(np.mean([len(e) for e in present])) if present else 0.0,
        complete=frames - missing - incomplete, incomplete=incomplete, missing=missing,
        h5_path=h5_path, png_path=png_path, image_lines=tuple(image_text(counted)),
    )
