"""Arrays as PNG images for the page: a tiny encoder (zlib, no plotting library) and a colour map.

The dashboard renders images server-side so that the page needs no plotting script: a float array
(NaN where nothing was counted yet) becomes 8-bit grey or a dark-to-bright colour ramp, scaled from
its own minimum to maximum (optionally on a log scale), NaN drawn in a neutral blue.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

# RGB of a position not counted yet: distinct from every value of the ramp.
NOT_COUNTED_RGB = (40, 60, 90)
#: The ramp's anchors, evenly spaced from the smallest value to the largest (black, purple, orange,
#: pale yellow): legible on a dark page, monotonic in lightness. The page draws its colour bars from them.
RAMP = ((0, 0, 4), (80, 18, 123), (182, 54, 121), (251, 136, 97), (252, 253, 191))
#: The ramp of a signed image (Output.diverging: the centre of mass), from -m to +m with 0 in the middle
#: (matplotlib's RdBu_r): blue below 0, near-white at 0, red above.
DIVERGING_RAMP = ((33, 102, 172), (103, 169, 207), (247, 247, 247), (239, 138, 98), (178, 24, 43))


def encode_png(rgb: np.ndarray) -> bytes:
    """A PNG file of ``rgb``, an (H, W, 3) uint8 array (8-bit truecolour, no interlace)."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 3) uint8 array, got {rgb.shape} {rgb.dtype}")
    height, width = rgb.shape[:2]
    # Every scanline starts with its filter type (0: none).
    raw = np.concatenate([np.zeros((height, 1), dtype=np.uint8), rgb.reshape(height, width * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
            + chunk(b"IEND", b""))


def value_range(values: np.ndarray, diverging: bool = False) -> tuple[float, float] | None:
    """What the colours span: the finite values' smallest to largest, or with ``diverging`` -m to +m, m
    their largest magnitude (0 in the middle); None where nothing is finite."""
    data = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(data)
    if not finite.any():
        return None
    if diverging:
        largest = float(np.max(np.abs(data[finite])))
        return -largest, largest
    return float(np.min(data[finite])), float(np.max(data[finite]))


def colourise(values: np.ndarray, log_scale: bool = False, scale: int = 1, diverging: bool = False) -> np.ndarray:
    """``values`` (2-D floats, NaN = not counted) as an (H*scale, W*scale, 3) uint8 image on the ramp
    (``diverging``: on DIVERGING_RAMP, centred on 0)."""
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {data.shape}")
    counted = np.isfinite(data)
    if log_scale:
        data = np.where(counted, np.log1p(np.clip(data, 0, None)), np.nan)
    ramp = np.array(DIVERGING_RAMP if diverging else RAMP, dtype=np.float64)
    unit = np.zeros(data.shape)
    span = value_range(data, diverging)
    if span is not None:
        low, high = span
        unit = np.where(counted, (data - low) / (high - low), 0.0) if high > low else np.where(counted, 0.5, 0.0)
    position = unit * (len(ramp) - 1)
    below = np.clip(np.floor(position).astype(int), 0, len(ramp) - 2)
    fraction = (position - below)[..., None]
    rgb = ramp[below] * (1 - fraction) + ramp[below + 1] * fraction
    rgb[~counted] = NOT_COUNTED_RGB
    image = np.round(rgb).astype(np.uint8)
    if scale > 1:
        image = image.repeat(scale, axis=0).repeat(scale, axis=1)
    return image


def array_png(values: np.ndarray, log_scale: bool = False, min_side_px: int = 256, diverging: bool = False) -> bytes:
    """``values`` as a PNG, enlarged by whole pixels to at least ``min_side_px`` on its longer side."""
    longest = max(np.asarray(values).shape[:2]) or 1
    return encode_png(colourise(values, log_scale, max(1, min_side_px // longest), diverging))
