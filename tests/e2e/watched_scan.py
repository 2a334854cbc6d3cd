"""One scan through a local stack, watched every way a user watches one: a live subscriber in this
process, ``sectorflow view --png`` as a process of its own, and the dashboard's API. Shared by the
tests of analyses (virtual detectors, the radial profile), which then compare each with the file."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stempy.io
from support import sectorflow_command, stack_up, wait_until

from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.consumer.counting.counted_file import CountedScan
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.live import LiveView, subscribe

WATCH_S = 120  # view's and the subscriber's --timeout: far beyond a small scan's seconds


@dataclass
class Watched:
    """What each watcher got of the scan."""

    views: list[LiveView]  # the in-process subscriber's views, the last one complete
    view_returncode: int
    view_out: str
    view_err: str
    png: Path  # view --png's picture
    images: dict[str, Any]  # the dashboard's images state, once it shows the scan's file
    image_png: bytes  # the dashboard's PNG of the image asked for


def dashboard_state(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url + "api/state", timeout=5) as answer:
            return json.loads(answer.read())
    except OSError:
        return {}  # not serving yet


def watch_scan(config: Config, path: Path, tmp_path: Path, output: Path, scan: int, scan_x: int, scan_y: int,
               image: str) -> Watched:
    """Acquire ``scan`` on a stack of ``config`` while both live readers follow it, then read the
    dashboard's images and its PNG of ``image``. view writes to files, never to a pipe nobody reads
    while the scan runs: a full pipe would stop it reading its live stream."""
    views: list[LiveView] = []
    png, out, err = tmp_path / "view.png", tmp_path / "view.out", tmp_path / "view.err"
    with stack_up(config, path, tmp_path / "run", output) as client, out.open("w") as out_file, \
            err.open("w") as err_file:
        def subscribers() -> int:
            return sum(int(s.extra.get("live_images_subscribers", 0)) for s in client.statuses("nodegroup").values())

        live = threading.Thread(target=lambda: views.extend(subscribe(path, scan=scan, timeout_s=WATCH_S)))
        viewer = subprocess.Popen([sys.executable, "-m", "sectorflow", "view", "--config", str(path), "--scan",
                                   str(scan), "--timeout", str(WATCH_S), "--png", str(png)], stdout=out_file,
                                  stderr=err_file, text=True)
        try:
            live.start()
            wait_until(lambda: subscribers() >= 4, 30, "both live readers to reach both NodeGroups")
            acquired = sectorflow_command("acquire", "--config", str(path), "--scan-number", str(scan),
                                          "--scan-shape", f"{scan_x}x{scan_y}", "--wait", "--timeout", str(WATCH_S))
            assert acquired.returncode == 0, acquired.stdout + acquired.stderr
            live.join(WATCH_S + 10)
            viewer.wait(timeout=WATCH_S + 10)
            # The dashboard shows the scan from its file once written.
            images = wait_until(lambda: (s := dashboard_state(config.dashboard.url())).get("images")
                                and s["images"]["scan"] == scan and s["images"]["path"] and s["images"], 60,
                                "the dashboard to show the scan's file")
            with urllib.request.urlopen(f"{config.dashboard.url()}images/{image}.png", timeout=10) as answer:
                image_png = answer.read()
        finally:
            if viewer.poll() is None:
                viewer.kill()
                viewer.wait()
    assert not live.is_alive()
    return Watched(views, viewer.returncode, out.read_text(), err.read_text(), png, images, image_png)


def complete_file(output: Path, scan: int) -> CountedScan:
    """The scan's counted file in ``output``, read back: complete, and still one stempy opens."""
    file = output / scan_file_name(scan)
    counted = read_counted_scan(file)
    assert counted.metadata["completeness"]["outcome"] == "complete"
    stempy.io.load_electron_counts(str(file))
    return counted
