"""Follows the kvstore for the dashboard: a Clone-pattern client's replica, turned into the page's state.

The kvstore client (C++ agent thread: snapshot, then ordered updates, reconnecting by itself after a
server restart) keeps the replica; every ``update_ms`` this follower reads it, builds the page's
state (``view.build_view``) off the event loop, and wakes every event stream waiting for a newer
state. ``/metrics`` reads the same snapshot.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sectorflow._core.protocol import wall_clock_s
from sectorflow.analysis import detector_attrs, detectors_from, load_mask
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.operations.scan_account import config_argument, records_of

from .images_source import PATTERN, ImageSource, ShownImages, labels
from .outline import MAX_SEGMENTS, mask_outline
from .png import DIVERGING_RAMP, RAMP
from .scan_groups import ScanGroups, group_scans
from .view import Remembered, build_view

log = logging.getLogger(__name__)

# Scans whose records are looked at each update beyond those listed: the one in progress may be
# an older number than the last listed (numbers need not grow with time).
SCAN_MARGIN = 10


@dataclass
class Snapshot:
    """One reading of the replica and the page's state built from it."""

    version: int = 0
    entries: Mapping[str, bytes] = field(default_factory=dict)
    recent: ScanGroups = field(default_factory=lambda: ScanGroups({}, {}))  # without the older scans' records
    reachable: bool = False
    view: dict[str, Any] = field(default_factory=dict)
    json: str = "{}"


class Follower:
    """The replica, read every ``update_ms``; ``wait_newer`` for the event streams."""

    def __init__(self, config: Config, extra: Callable[[], dict[str, Any]] | None = None,
                 on_scans: Callable[[ScanGroups], None] | None = None) -> None:
        """``extra()`` is merged into each state; ``on_scans`` sees each update's recent scans (on the
        update's thread)."""
        self.config = config
        kv = config.kvstore
        self.address = f"tcp://{kv.host}:{kv.port}"
        self.images = ImageSource()
        self._extra = extra or (lambda: {})
        self._on_scans = on_scans or (lambda _groups: None)
        self._memory = Remembered()
        self._client: Client | None = None
        self._snapshot = Snapshot()
        self._changed: asyncio.Condition | None = None
        self._was_reachable: bool | None = None
        self.images_version = 0
        # The virtual detectors the NodeGroups use, drawn on the summed pattern ({} with the images off):
        # centre_row, centre_col and under "detectors" each one's kind and geometry by name.
        try:
            self._detectors = _with_outlines(detector_attrs(detectors_from(config)), config)
        except SectorflowError as error:  # a mask file kept where the NodeGroups run, not here: nothing drawn
            log.warning("the virtual detectors are not drawn on the summed pattern: %s", error)
            self._detectors = {}

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def open(self) -> None:
        """Connects the kvstore client (as a viewer: the dashboard reads, never writes)."""
        self._client = Client.from_config(self.config, name="dashboard", role="viewer")
        if self.config.analysis.live:
            self.images.follow_live(self.config)

    def close(self) -> None:
        self.images.stop()
        if self._client is not None:
            self._client.close()
            self._client = None

    async def run(self) -> None:
        """Updates the state every ``update_ms`` until cancelled."""
        self._changed = asyncio.Condition()
        period_s = self.config.dashboard.update_ms / 1000
        while True:
            started = time.monotonic()
            try:
                await self.update()
            except Exception:  # noqa: BLE001 - one bad update must not end the dashboard; logged with its trace
                log.exception("dashboard update failed")
            await asyncio.sleep(max(0.0, period_s - (time.monotonic() - started)))  # the update period

    async def update(self) -> None:
        """Reads the replica once and publishes the new state."""
        snapshot = await asyncio.to_thread(self._read)
        self._snapshot = snapshot
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    async def wait_newer(self, version: int, timeout_s: float) -> Snapshot:
        """The first state newer than ``version``, or the current one after ``timeout_s``."""
        assert self._changed is not None, "run() has not started"
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: self._snapshot.version > version), timeout_s)
            except asyncio.TimeoutError:
                pass
        return self._snapshot

    def payload(self, images: ShownImages, version: int) -> dict[str, Any]:
        """What the page draws a scan's images from (its ``images``), the images themselves at
        ``/images/<name>.png``."""
        return {
            "scan": images.scan, "scan_shape": list(images.scan_shape), "complete": images.complete,
            "positions_counted": images.positions_counted, "names": [*images.images, *images.sums],
            "path": images.path, "labels": labels(images), "pattern": PATTERN if images.diffraction is not None else None,
            "live": not images.path,
            "version": version,
            "ranges": images.ranges(),
            "electrons_per_frame": images.electrons_per_frame,
            "frame_shape": None if images.diffraction is None else list(images.diffraction.shape),
            "detectors": self._detectors,
            "ramp": RAMP,
            # The signed images (the centre of mass), drawn on this ramp from -m to +m (png.py).
            "diverging": [name for name in [*images.images, *images.sums] if images.diverging(name)],
            "diverging_ramp": DIVERGING_RAMP,
        }

    def past_images(self, scan: int) -> ShownImages:
        """A scan of the history, its images from its file (blocking: call it off the event loop).

        :raises LookupError: the scan is not among the recent ones, or has no counted file (the message
            says which).
        :raises SectorflowError: its file cannot be read.
        """
        keys = self._snapshot.recent.scans.get(scan)
        if keys is None:
            raise LookupError(f"scan {scan} is not in the history")
        record = records_of(keys, scan).file
        if record is None or not record.path:
            raise LookupError(f"scan {scan} has no counted file")
        return self.images.past(scan, record.path)

    def _read(self) -> Snapshot:
        assert self._client is not None, "open() first"
        reachable = bool(self._client.synced())
        if reachable != self._was_reachable:
            if reachable:
                log.info("kvstore %s reachable: following its updates", self.address)
            elif self._was_reachable is None:
                log.info("kvstore %s: waiting for its first snapshot", self.address)
            else:
                log.warning("kvstore %s unreachable: showing the last known state", self.address)
            self._was_reachable = reachable
        entries = self._client.subtree("")
        recent = group_scans(entries).newest(self.config.dashboard.recent_scans + SCAN_MARGIN)
        self._on_scans(recent)
        if self.images.update(recent):  # reads a new scan's file once: a moment, off the event loop
            self.images_version += 1
        view = build_view(recent, wall_clock_s(),
                          self._memory, reachable=reachable, address=self.address,
                          sequence=int(self._client.sequence()), recent_scans=self.config.dashboard.recent_scans,
                          config=config_argument(self.config.source), stack=self._client.stack_id,
                          beamline=self.config)
        images = self.images.latest()
        view["images"] = None if images is None else self.payload(images, self.images_version)
        summaries = self.images.summaries()
        for scan in view["recent"]:
            summary = summaries.get(scan["scan"])
            if summary is not None and summary.path == scan["path"]:
                scan["electrons_per_frame"] = summary.electrons_per_frame
                scan["thumbnail"] = True
        view.update(self._extra())
        version = self._snapshot.version + 1
        return Snapshot(version, entries, recent, reachable, view, json.dumps(view, separators=(",", ":")))


def _with_outlines(attrs: dict[str, Any], config: Config) -> dict[str, Any]:
    """The detectors' attributes with each mask's outline (``outline``: an SVG path in detector
    pixels), or None and why not (``outline_omitted``) for a mask of more edges than a page draws."""
    d = config.detector
    for v in config.analysis.virtual_detectors:
        if v.kind == "mask" and v.name in attrs.get("detectors", {}):
            mask = load_mask(v.name, v.mask, (d.frame_rows, d.frame_cols)).reshape(d.frame_rows, d.frame_cols)
            outline = mask_outline(mask)
            attrs["detectors"][v.name] = {**attrs["detectors"][v.name], "outline": outline, **(
                {} if outline is not None else
                {"outline_omitted": f"its outline has more than {MAX_SEGMENTS} edges; its image shows where it is"})}
    return attrs
