"""``sectorflow demo``: the whole pipeline on one machine, one scan, a summary and a picture.

Starts the local stack (kvstore, aggregator, NodeGroups under mpiexec, one producer per receiver),
asks for a simulated scan, waits for its HDF5 file while showing progress, prints the summary,
writes the overview PNG and stops everything, also when interrupted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.errors import SectorflowError, require
from sectorflow.kvstore import Client
from sectorflow.protocol import SERVICE_NODEGROUP
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.operations.acquire import publish_request
from sectorflow.waiting import WaitTimeout, every, wait_until

from sectorflow.live.overview import write_overview_png
from .readiness import sectors_sent
from .stack import DASHBOARD, dashboard_url, start_stack
from .summary import ScanSummary, summarize

log = logging.getLogger(__name__)

POLL_S = 0.1  # how often the output directory is looked at
PROGRESS_S = 2.0  # how often a progress line is logged


@dataclass(frozen=True)
class DemoOptions:
    scan_x: int = 128
    scan_y: int = 128
    ranks: int = 2
    run_dir: Path = Path("runs/demo")
    output_dir: Path | None = None  # default: [nodegroup] output_dir
    png: bool = True
    ready_timeout_s: float = 120.0
    scan_timeout_s: float = 600.0


def run_demo(config: Config, options: DemoOptions) -> ScanSummary:
    """Run one simulated scan through the whole local pipeline; returns its summary."""
    if options.png:
        require("matplotlib", "plot", "to draw the scan's PNG (or run the demo with --no-png)")  # before, not after, the scan
    output_dir = (options.output_dir or Path(config.nodegroup.output_dir)).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    supervisor = start_stack(config, options.run_dir, options.ranks, output_dir, True, options.ready_timeout_s,
                             dashboard=config.dashboard.with_stack)
    if DASHBOARD in supervisor.names():
        log.info("watch it run: %s", dashboard_url(config))
    try:
        with Client.from_config(config, name="demo", role="operator") as client:
            scan_number = _next_scan_number(output_dir)
            total = options.scan_x * options.scan_y * config.n_receivers
            log.info("scan %d: acquiring %d x %d positions (%d sectors)", scan_number, options.scan_x,
                     options.scan_y, total)
            started = time.monotonic()
            publish_request(client, config, scan_number, options.scan_x, options.scan_y, config.simulator.rate_hz)
            path = _wait_for_file(client, output_dir, scan_number, total, options.scan_timeout_s, supervisor.check)
            seconds = time.monotonic() - started
    finally:
        supervisor.stop_all()
    counted = read_counted_scan(path)
    png = write_overview_png(counted, path.with_suffix(".png"), f"sectorflow scan {scan_number}") if options.png else None
    return summarize(config, scan_number, counted, path, seconds, png)


def _next_scan_number(output_dir: Path) -> int:
    """One past the highest scan already counted in ``output_dir`` (1 for an empty one)."""
    numbers = [0]
    for path in output_dir.glob(scan_file_name(0).replace("0" * 10, "*")):
        digits = path.name.split("_")[1]
        if digits.isdigit():
            numbers.append(int(digits))
    return max(numbers) + 1


def _wait_for_file(client: Client, output_dir: Path, scan_number: int, total_sectors: int, timeout_s: float,
                   check: Callable[[], None]) -> Path:
    """The scan's HDF5 file once it is there; ``check`` raises if a service died meanwhile."""
    path = output_dir / scan_file_name(scan_number)

    def progress(elapsed_s: float) -> None:
        sent = sectors_sent(client, scan_number)
        groups = {name: s.state for (_, name), s in client.statuses(SERVICE_NODEGROUP).items()}
        log.info("scan %d: %d of %d sectors sent (%.0f%%), NodeGroups: %s, %.0f s", scan_number, sent,
                 total_sectors, 100.0 * sent / total_sectors, ", ".join(sorted(set(groups.values()))) or "-",
                 elapsed_s)

    report = every(PROGRESS_S, progress)

    def on_poll(elapsed_s: float) -> None:
        check()
        report(elapsed_s)

    try:
        wait_until(path.exists, timeout_s, str(path), POLL_S, on_poll=on_poll)
    except WaitTimeout:
        raise SectorflowError(f"scan {scan_number}: no HDF5 file in {output_dir} after {timeout_s:.0f} s; "
                              "see the service logs in the run directory") from None
    return path
