"""An analysis of one's own on the live stream: the radial profile of a scan's diffraction, frame
by frame as the NodeGroups count it (sectorflow.live.frames), without touching the NodeGroups'
work. Run it beside a running stack, then acquire a scan:

    python examples/radial_profile.py --config configs/local.toml --timeout 120 &
    sectorflow acquire --scan-shape 64x64 --wait

It prints the profile (electrons per pixel of each ring, 2 px wide) and how many frames it saw;
a frame it missed (it was too slow, the NodeGroups count it) is named too.

The NodeGroups make the same profile per position themselves when ``[analysis] analyses`` lists
"radial_profile" (analysis/radial_profile.py, analysis/SPEC.md): into the file at
/analysis/radial_profile, the live view, the dashboard and ``sectorflow view``. This example stays
as the way to an analysis one does not register.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from sectorflow.live import frames

RING_WIDTH_PX = 2.0


def radial_profile(config: str | Path, scan: int | None, timeout_s: float | None) -> tuple[np.ndarray, int, int]:
    """Electrons per pixel in rings around the frame centre, summed over the scan's frames as they
    arrive; returns (profile, frames seen, probe positions of the scan)."""
    counts: np.ndarray | None = None
    ring_of_pixel: np.ndarray | None = None
    pixels_per_ring: np.ndarray | None = None
    seen = positions = 0
    for frame in frames(config, scan=scan, timeout_s=timeout_s):
        if ring_of_pixel is None:
            rows, cols = frame.frame_shape
            yy, xx = np.indices((rows, cols))
            distance = np.hypot(yy - rows / 2, xx - cols / 2)
            ring_of_pixel = (distance / RING_WIDTH_PX).astype(np.int64).ravel()
            pixels_per_ring = np.bincount(ring_of_pixel)
            counts = np.zeros(len(pixels_per_ring), dtype=np.int64)
            positions = frame.scan_shape[0] * frame.scan_shape[1]
        _, events = frame
        counts += np.bincount(ring_of_pixel[events], minlength=len(counts))
        seen += 1
    if counts is None:
        return np.zeros(0), 0, 0
    return counts / pixels_per_ring, seen, positions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/local.toml", help="the running stack's configuration")
    parser.add_argument("--scan", type=int, default=None, help="scan to follow (default: the next one)")
    parser.add_argument("--timeout", type=float, default=None, help="give up after this many seconds")
    args = parser.parse_args()
    profile, seen, positions = radial_profile(args.config, args.scan, args.timeout)
    if not seen:
        print("no frames arrived")
        return 1
    print(f"{seen} of {positions} frames seen")
    for ring, value in enumerate(profile):
        print(f"{ring * RING_WIDTH_PX:6.1f} px  {value:.4f} electrons/pixel")
    return 0 if seen == positions else 1


if __name__ == "__main__":
    raise SystemExit(main())
