"""The radial profile per probe position: a frame's electrons in rings of ``ring_width_px`` around
the pattern centre ([analysis] centre_row, centre_col), one vector per position. On when
``[analysis] analyses`` lists "radial_profile"; a 64 x 64 scan of 576 x 576 frames holds 204 rings a
position (3.3 MB)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .registry import PER_POSITION, Analysis, Context, Frames, Output, Values, register

RING_WIDTH_PX = 2.0


@lru_cache(maxsize=8)
def ring_of_pixel(frame_shape: tuple[int, int], centre_row: float, centre_col: float, width: float) -> np.ndarray:
    """Each pixel's ring, flat: its distance from the centre over the ring width (pixel (r, c) at the
    point (r, c), analysis/SPEC.md "Pixel coordinates")."""
    rows, cols = frame_shape
    yy, xx = np.indices((rows, cols))
    return (np.hypot(yy - centre_row, xx - centre_col) / width).astype(np.int64).ravel()


def _rings(context: Context) -> np.ndarray:
    return ring_of_pixel(context.frame_shape, context.centre_row, context.centre_col, RING_WIDTH_PX)


def _outputs(context: Context) -> list[Output]:
    rings = int(_rings(context).max()) + 1
    return [Output(name="radial_profile", path="/analysis/radial_profile", per=PER_POSITION, dtype="float32",
                   unit="electrons", label=f"radial profile ({RING_WIDTH_PX:g} px rings)", extra_shape=(rings,),
                   attrs={"ring_width_px": RING_WIDTH_PX, "centre_row": context.centre_row,
                          "centre_col": context.centre_col}, colour_map="viridis", text="vector")]


def radial_profile(frames: Frames, context: Context) -> Values:
    rings = _rings(context)
    count = int(rings.max()) + 1
    keys = frames.frame_of_event() * count + rings[np.asarray(frames.events, dtype=np.int64)]
    return {"radial_profile": np.bincount(keys, minlength=len(frames) * count).reshape(len(frames), count)}


register(Analysis(name="radial_profile", summary="electrons in 2 px rings around the pattern centre per position",
                  outputs=_outputs, settings={"ring_width_px": RING_WIDTH_PX}, from_events=radial_profile))
