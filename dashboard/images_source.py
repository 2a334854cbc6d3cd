"""Where the page's images come from: the one module to switch when live images exist.

For now the images are those of the latest scan with a counted file (its ``scans/<n>/file``
record), computed from the file's electron events by ``orchestration/images.py``: the virtual
bright field and the summed diffraction pattern. The shape of what this returns is that of
``sectorflow.live.subscribe``'s ``LiveView`` (scan, scan_shape, images with NaN where not counted
yet, diffraction, positions_counted, complete), so that switching to live images of the scan in
progress changes this module only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sectorflow.counting import read_counted_scan
from sectorflow.orchestration.images import summed_diffraction, virtual_bright_field
from sectorflow.scan_account import records_of

from .scan_groups import group_scans

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveView:
    """The images of one scan, as ``sectorflow.live`` will yield them."""

    scan: int
    scan_shape: tuple[int, int]                       # (rows, cols) of probe positions
    images: dict[str, np.ndarray] = field(default_factory=dict)  # "bright_field", ...: NaN where not counted
    diffraction: np.ndarray | None = None             # summed electrons per detector pixel
    positions_counted: int = 0
    complete: bool = False
    path: str = ""                                     # the file the images were computed from


class ImageSource:
    """The latest scan's images; computed once per file, read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._view: LiveView | None = None
        self._failed: set[str] = set()  # files that could not be read: reported once, not retried

    def latest(self) -> LiveView | None:
        """The images computed last (None before the first scan with a file)."""
        with self._lock:
            return self._view

    def update(self, entries: Mapping[str, bytes]) -> bool:
        """Computes the images of the newest scan whose file record names a file, if not done yet.

        Blocking (reads the file): call it off the event loop. Returns True when the images changed.
        """
        target = _newest_file(entries)
        if target is None:
            return False
        scan, path = target
        with self._lock:
            if (self._view is not None and self._view.path == path) or path in self._failed:
                return False
        try:
            counted = read_counted_scan(path)
        except (OSError, ValueError, KeyError) as error:
            log.warning("scan %d: cannot read %s for its images: %s", scan, path, error)
            with self._lock:
                self._failed.add(path)
            return False
        bright = virtual_bright_field(counted).astype(np.float64)
        missing = np.asarray(counted.missing_positions, dtype=np.int64)
        bright.reshape(-1)[missing[missing < bright.size]] = np.nan
        view = LiveView(scan=scan, scan_shape=tuple(bright.shape), images={"bright_field": bright},
                        diffraction=summed_diffraction(counted).astype(np.float64),
                        positions_counted=int(bright.size - len(missing)), complete=len(missing) == 0, path=path)
        with self._lock:
            self._view = view
        log.info("scan %d: images from %s", scan, path)
        return True


def _newest_file(entries: Mapping[str, bytes]) -> tuple[int, str] | None:
    by_scan = group_scans(entries)[1]
    for scan in sorted(by_scan, reverse=True):
        record = records_of(by_scan[scan], scan).file
        if record is not None and record.path and Path(record.path).is_file():
            return scan, record.path
    return None
