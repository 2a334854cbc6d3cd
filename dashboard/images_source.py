"""Where the page's images come from: the scan being counted, live, else the latest counted file.

While a scan is counted, a thread follows the NodeGroups' live stream (``sectorflow.live.subscribe``,
live/SPEC.md): the virtual images (each detector's, centre of mass) and the summed
diffraction pattern so far, NaN where a position is not counted yet. Once a scan's file is
written, its images are read from the file (its /virtual_images group, written by the NodeGroups;
for a file without one, the bright field and pattern are computed from its events by
``consumer/counting/images.py``). The newer scan of the two is shown; for the same scan, the file.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sectorflow.analysis import PER_POSITION, Context, Output, outputs_of, registered
from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.errors import SectorflowError
from sectorflow.live import LiveView, subscribe
from sectorflow.consumer.counting.images import summed_diffraction, virtual_bright_field
from sectorflow.operations.scan_account import records_of

from .png import array_png, value_range
from .scan_groups import ScanGroups

log = logging.getLogger(__name__)

#: How long the live thread waits before following again after the stream failed (no kvstore).
RETRY_S = 2.0
#: Longest wait for the live thread to end: its stream may be waiting for the kvstore's first
#: snapshot (sectorflow.live's SYNC_TIMEOUT_S, 10 s).
STOP_S = 15.0
#: Scans whose summary (electrons per frame, thumbnail) is kept for the history.
SUMMARIES_KEPT = 64
#: Longest side of a history thumbnail, pixels: a larger scan is shown every n-th position.
THUMBNAIL_PX = 64
#: Past scans opened from the history whose images stay read (a page going back and forth reads once).
PAST_KEPT = 4


@dataclass(frozen=True)
class ShownImages:
    """The images of one scan as the page shows them."""

    scan: int
    scan_shape: tuple[int, int]                       # (rows, cols) of probe positions
    images: dict[str, np.ndarray] = field(default_factory=dict)  # per-position outputs: NaN where not counted
    sums: dict[str, np.ndarray] = field(default_factory=dict)    # per-scan outputs (the summed pattern)
    outputs: dict[str, Output] = field(default_factory=dict)     # what each is (sectorflow.analysis)
    positions_counted: int = 0
    complete: bool = False
    path: str = ""                                     # the file they come from; "" while counted live
    # Each image encoded as PNG once, when first asked for, then served to every page that asks
    # (a page reloads its images at every update that changed them).
    pngs: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    _ranges: dict[str, list[float] | None] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def live(cls, view: LiveView) -> ShownImages:
        return cls(scan=view.scan, scan_shape=tuple(view.scan_shape), images=with_magnitude(view.images),
                   sums=dict(view.sums), outputs=dict(view.outputs), positions_counted=view.positions_counted,
                   complete=view.complete)

    @property
    def diffraction(self) -> np.ndarray | None:
        """The summed pattern (the detectors are drawn on it), None without."""
        return self.sums.get(PATTERN)

    @property
    def electrons_per_frame(self) -> float | None:
        """Mean electrons counted per frame: the summed pattern over the positions counted."""
        if self.diffraction is None or self.positions_counted <= 0:
            return None
        return float(np.sum(self.diffraction)) / self.positions_counted

    def picture(self, name: str) -> tuple[np.ndarray, bool] | None:
        """Output ``name`` as a 2-D array to draw and whether in log scale; None if there is none."""
        data = self.images.get(name, self.sums.get(name))
        if data is None:
            return None
        output = self.outputs.get(name)
        if output is None:  # com_magnitude, or a file's image no registered analysis describes
            return data, False
        return output.picture(data), output.log_scale

    def diverging(self, name: str) -> bool:
        """Whether output ``name`` is signed and drawn centred on 0 (Output.diverging: the centre of mass)."""
        output = self.outputs.get(name)
        return output is not None and output.diverging

    def ranges(self) -> dict[str, list[float] | None]:
        """What each image's colour bar spans (png.value_range: smallest to largest, a signed one -m to +m);
        None where nothing is counted."""
        if self._ranges:  # computed once: the page's state is built every update
            return self._ranges
        arrays = {**self.images, **self.sums}
        out: dict[str, list[float] | None] = {}
        for name, data in arrays.items():
            span = value_range(data, self.diverging(name))
            out[name] = None if span is None else list(span)
        self._ranges.update(out)
        return out


@dataclass(frozen=True)
class ScanSummary:
    """What the history shows of a scan whose file the dashboard read."""

    path: str
    electrons_per_frame: float | None
    thumbnail: bytes  # PNG of the first image (a detector's), at most THUMBNAIL_PX a side


#: The output the virtual detectors are drawn on (analysis/builtin.py's summed pattern).
PATTERN = "diffraction"
#: What the page adds to the centre of mass: its magnitude, from its two components.
MAGNITUDE = ("com_magnitude", ("centre of mass magnitude", "px"))


def labels(shown: ShownImages) -> dict[str, list[str]]:
    """Each image's title and unit as the page shows them, by name: its declaration's."""
    out = {name: [o.label, o.unit] for name, o in shown.outputs.items()}
    if MAGNITUDE[0] in shown.images:
        out[MAGNITUDE[0]] = list(MAGNITUDE[1])
    for name in [*shown.images, *shown.sums]:  # a file's image no registered analysis describes
        out.setdefault(name, [name.replace("_", " "), ""])
    return out


def with_magnitude(images: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``images`` and, when it has both centre-of-mass components, their magnitude (``com_magnitude``)."""
    out = dict(images)
    if "com_x" in out and "com_y" in out:
        out[MAGNITUDE[0]] = np.hypot(out["com_x"], out["com_y"])
    return out


class ImageSource:
    """The images to show; the file's computed once per file, the live ones as they come. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._file: ShownImages | None = None
        self._live: ShownImages | None = None
        self._live_changed = False
        self._failed: set[str] = set()  # files that could not be read: reported once, not retried
        self._summaries: dict[int, ScanSummary] = {}
        self._past: dict[str, ShownImages] = {}  # path -> a past scan's images, the PAST_KEPT last opened
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def follow_live(self, config: Config) -> None:
        """Start following the NodeGroups' live stream (a thread, until stop())."""
        self._thread = threading.Thread(target=self._follow, args=(config,), name="live-images")
        self._thread.start()

    def stop(self) -> None:
        """Ends the live thread and waits for it: a thread left inside the kvstore client or ZeroMQ
        while the interpreter exits aborts the process."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_S)
            if self._thread.is_alive():
                log.warning("live images: the thread did not end within %.0f s", STOP_S)

    def latest(self) -> ShownImages | None:
        """The scan to show: the newer of the live and the file's (for the same scan, the file)."""
        with self._lock:
            live, shown = self._live, self._file
        if live is not None and (shown is None or live.scan > shown.scan):
            return live
        return shown

    def summaries(self) -> dict[int, ScanSummary]:
        """Scan -> its summary, for the scans whose file was read (the newest SUMMARIES_KEPT)."""
        with self._lock:
            return dict(self._summaries)

    def past(self, scan: int, path: str) -> ShownImages:
        """The images of a past scan, read from its file ``path`` (opened from the history).

        Blocking (reads the file once; the PAST_KEPT last opened stay read): call it off the event loop.

        :raises SectorflowError: the file cannot be read (it names the file and why).
        """
        with self._lock:
            shown = self._file if self._file is not None and self._file.path == path else self._past.get(path)
        if shown is not None:
            return shown
        try:
            shown = shown_from_file(scan, path)
        except (OSError, ValueError, KeyError) as error:
            raise SectorflowError(f"scan {scan}: cannot read its file {path} for its images: {error}") from error
        with self._lock:
            self._past[path] = shown
            for old in list(self._past)[:-PAST_KEPT]:
                del self._past[old]
        return shown

    def update(self, groups: ScanGroups) -> bool:
        """Takes the newest scan's file if not done yet, and any live update since the last call.

        Blocking (may read a file): call it off the event loop. Returns True when the images changed.
        """
        with self._lock:
            changed, self._live_changed = self._live_changed, False
        return self._update_file(groups) or changed

    def _follow(self, config: Config) -> None:
        # subscribe() follows one scan to its end; the stream is opened again for the next.
        while not self._stop.is_set():
            try:
                for view in subscribe(config, stop=self._stop):
                    with self._lock:
                        self._live = ShownImages.live(view)
                        self._live_changed = True
            except Exception as error:  # the page keeps its images thread whatever one stream did
                log.warning("live images: %s; following again in %.0f s", error, RETRY_S)
                self._stop.wait(RETRY_S)

    def _update_file(self, groups: ScanGroups) -> bool:
        target = _newest_file(groups)
        if target is None:
            return False
        scan, path = target
        with self._lock:
            if (self._file is not None and self._file.path == path) or path in self._failed:
                return False
        try:
            shown = shown_from_file(scan, path)
        except (OSError, ValueError, KeyError, SectorflowError) as error:
            log.warning("scan %d: cannot read %s for its images: %s", scan, path, error)
            with self._lock:
                self._failed.add(path)
            return False
        # The first output's picture (the shipped configurations': the bright field).
        first = shown.picture(next(iter(shown.images)))[0]  # type: ignore[index]
        step = max(1, -(-max(first.shape) // THUMBNAIL_PX))
        thumbnail = array_png(first[::step, ::step], min_side_px=THUMBNAIL_PX)
        summary = ScanSummary(path, shown.electrons_per_frame, thumbnail)
        with self._lock:
            self._file = shown
            self._summaries[scan] = summary
            for old in sorted(self._summaries)[:-SUMMARIES_KEPT]:
                del self._summaries[old]
        log.info("scan %d: images from %s", scan, path)
        return True


def shown_from_file(scan: int, path: str) -> ShownImages:
    """A scan's images as its counted file holds them (its /virtual_images; for a file without them,
    the bright field and pattern its events give).

    :raises OSError, ValueError, KeyError, SectorflowError: the file cannot be read.
    """
    counted = read_counted_scan(path)
    missing = np.asarray(counted.missing_positions, dtype=np.int64)
    per_position = {n for n, o in counted.outputs.items() if o.per == PER_POSITION}
    images = {n: np.asarray(image, dtype=np.float64) for n, image in counted.images.items() if n in per_position}
    sums = {n: np.asarray(v, dtype=np.float64) for n, v in counted.images.items() if n not in per_position}
    outputs = dict(counted.outputs)
    if not images:  # a file written without virtual images: what its events give
        bright = virtual_bright_field(counted).astype(np.float64)
        bright.reshape(-1)[missing[missing < bright.size]] = np.nan
        frame_rows, frame_cols = counted.frame_shape
        context = Context(counted.frame_shape, frame_rows / 2, frame_cols / 2, ("bright_field",))
        outputs = {o.name: o for o in outputs_of(registered(), context) if o.name in ("bright_field", PATTERN)}
        images, sums = {"bright_field": bright}, {PATTERN: summed_diffraction(counted).astype(np.float64)}
    rows, cols = counted.scan_shape
    return ShownImages(scan=scan, scan_shape=(rows, cols), images=with_magnitude(images), sums=sums,
                       outputs=outputs, positions_counted=int(rows * cols - len(missing)),
                       complete=len(missing) == 0, path=path)


def _newest_file(groups: ScanGroups) -> tuple[int, str] | None:
    by_scan = groups.scans
    for scan in sorted(by_scan, reverse=True):
        record = records_of(by_scan[scan], scan).file
        if record is not None and record.path and Path(record.path).is_file():
            return scan, record.path
    return None
