"""What a LiberTEM client attached costs the NodeGroups: frames/s of one stack with and without it.

One local stack (bench/stack_run.py's services: kvstore, aggregator, two NodeGroup ranks, the
producer daemons) runs ``SCAN`` scans in ``ROUNDS`` rounds. Each round scans once with nothing
reading the counted frames and once with ``sectorflow libertem`` subscribed to the NodeGroups'
live stream and a real LiberTEM-live client (SumUDF, the client of bench/libertem_bridge.py)
reading its acquisition; the order alternates round by round. The rate is the NodeGroups' frames
over the time from the acquisition request to the HDF5 file on disk, as in bench 'pipeline'. On a
machine whose cores the whole stack shares, LiberTEM's own work competes for them too: the ratio
is what a user of such a machine sees, not the bridge's cost alone.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
import tempfile
import time
from pathlib import Path

from bench import BenchmarkResult, RunOptions, Target
from bench.config_file import with_free_ports, write_config
from bench.libertem_bridge import CLIENT, bytes_per_chunk
from bench.ratios import median, ratio
from bench.stack_run import READY_TIMEOUT_S
from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration import ServiceSpec, Supervisor
from sectorflow.orchestration.stack import start_stack
from sectorflow.orchestration.summary import summarize
from sectorflow.operations.acquire import publish_request
from sectorflow.waiting import wait_until

log = logging.getLogger(__name__)

DESCRIPTION = "NodeGroups' frames/s with a LiberTEM-live client attached through the bridge against without"
SCAN = (128, 128)
ROUNDS = 3
TARGET = 0.95  # the NodeGroups keep at least this share of their rate with LiberTEM attached
SCAN_TIMEOUT_S = 900.0
ATTACH_TIMEOUT_S = 120.0
POLL_S = 0.05


def _scan(supervisor: Supervisor, client: Client, config: Config, number: int, output_dir: Path) -> tuple[float, int]:
    """Scan ``number``: (frames/s from request to file, frames complete in the file)."""
    path = output_dir / scan_file_name(number)
    started = time.monotonic()
    publish_request(client, config, number, *SCAN, config.simulator.rate_hz)

    def written() -> bool:
        supervisor.check()  # a dead service raises at once instead of running out the clock
        return path.exists()

    wait_until(written, SCAN_TIMEOUT_S, str(path), POLL_S)
    seconds = time.monotonic() - started
    summary = summarize(config, number, read_counted_scan(path), path, seconds, None)
    return summary.frames_per_s, summary.complete


def _attach(supervisor: Supervisor, client: Client, config: Config, round_index: int) -> tuple[str, str]:
    """Start the bridge and a LiberTEM client connected to it, ready for the next scan; their names."""
    bridge, libertem = f"libertem-bridge-{round_index}", f"libertem-client-{round_index}"
    supervisor.start(ServiceSpec(bridge, (sys.executable, "-m", "sectorflow", "libertem", "--config",
                                          str(config.source), "--listen", "127.0.0.1:0")), capture_stdout=True)
    listening = re.search(r"listening on 127\.0\.0\.1:(\d+)", supervisor.read_line(bridge, ATTACH_TIMEOUT_S))
    if listening is None:
        raise RuntimeError(f"{bridge} did not say where it listens")
    supervisor.start(ServiceSpec(libertem, (sys.executable, "-c", CLIENT, listening.group(1),
                                            str(bytes_per_chunk(config.libertem.chunk_bytes)), "1")),
                     capture_stdout=True)
    if supervisor.read_line(libertem, ATTACH_TIMEOUT_S).strip() != "ready":
        raise RuntimeError(f"{libertem} did not start")

    def attached() -> bool:
        bridges = client.statuses("libertem").values()
        groups = client.statuses("nodegroup").values()
        return any(s.extra.get("client_connected") for s in bridges) and bool(groups) and all(
            int(s.extra.get("live_frames_subscribers", 0)) >= 1 for s in groups)

    wait_until(attached, ATTACH_TIMEOUT_S, "the bridge subscribed and LiberTEM connected", POLL_S)
    return bridge, libertem


def _empty_positions(client: Client, number: int) -> int:
    """The positions of scan ``number`` the bridge sent LiberTEM empty, from its status once it finished it."""
    def finished() -> dict | None:
        for status in client.statuses("libertem").values():
            if status.extra.get("last_scan") == number:
                return dict(status.extra)
        return None

    extra = wait_until(finished, ATTACH_TIMEOUT_S, f"the bridge to finish scan {number}", POLL_S)
    return int(extra["last_scan_empty"])


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    rates: dict[str, list[float]] = {"without": [], "with LiberTEM": []}
    complete: dict[str, list[int]] = {"without": [], "with LiberTEM": []}
    empty: list[int] = []
    rounds = 1 if options.quick else ROUNDS
    with tempfile.TemporaryDirectory(prefix="bench-libertem-attached-") as work:
        workdir = Path(work)
        # The kvstore's records in this run's folder: its scan numbers start at 1 whatever ran before.
        config = dataclasses.replace(config, kvstore=dataclasses.replace(config.kvstore, log_dir=str(workdir / "kv")))
        config = write_config(with_free_ports(config), workdir / "config.toml")
        output_dir = workdir / "counted"
        output_dir.mkdir()
        supervisor = start_stack(config, workdir / "run", 2, output_dir, True, READY_TIMEOUT_S)
        try:
            with Client.from_config(config, name="bench") as client:
                number = 0
                for round_index in range(rounds):
                    order = ["without", "with LiberTEM"] if round_index % 2 == 0 else ["with LiberTEM", "without"]
                    for variant in order:
                        number += 1
                        names: tuple[str, str] | None = None
                        if variant == "with LiberTEM":
                            names = _attach(supervisor, client, config, round_index)
                        rate, frames = _scan(supervisor, client, config, number, output_dir)
                        log.info("round %d, %s: %.0f frames/s", round_index + 1, variant, rate)
                        rates[variant].append(rate)
                        complete[variant].append(frames)
                        if names is not None:
                            bridge, libertem = names
                            done = supervisor.read_line(libertem, SCAN_TIMEOUT_S).split()
                            if done[:1] != ["done"]:
                                raise RuntimeError(f"LiberTEM did not finish scan {number}: {done}")
                            empty.append(_empty_positions(client, number))
                            supervisor.stop(bridge)
                            supervisor.stop(libertem)
        finally:
            supervisor.stop_all()
    without, attached = median(rates["without"]), median(rates["with LiberTEM"])
    share = ratio(attached, without)
    rows = [[variant, median(values), min(values), max(values), ratio(median(values), without),
             all(c == SCAN[0] * SCAN[1] for c in complete[variant])] for variant, values in rates.items()]
    d = config.detector
    notes = [
        f"{SCAN[0]} x {SCAN[1]} scans of {d.frame_rows} x {d.frame_cols} frames in one stack, {rounds} round(s), "
        "the order alternating; frames/s from the acquisition request to the HDF5 file on disk; medians, min "
        "and max over the rounds.",
        "with LiberTEM: 'sectorflow libertem' subscribed to the NodeGroups' live stream and a LiberTEM-live client "
        "(SumUDF on a PipelinedExecutor of 2 workers) reading the scan; both on this machine's cores, which the "
        "stack shares.",
        "with / without round by round: " + ", ".join(
            f"{ratio(a, b):.2f}" for a, b in zip(rates["with LiberTEM"], rates["without"])),
        "positions LiberTEM got empty per attached scan (the bridge's positions_empty): "
        + ", ".join(str(e) for e in empty),
    ]
    targets = [Target("NodeGroups' frames/s with a LiberTEM client attached / without", f">= {TARGET:.2f}",
                      f"{share:.2f}", share >= TARGET)]
    return BenchmarkResult(columns=["variant", "frames/s (median)", "frames/s min", "frames/s max", "/ without",
                                    "every frame in the file"],
                           rows=rows, notes=notes, details={"rates": rates, "positions_empty": empty},
                           targets=targets)


def plot(result: BenchmarkResult, path: Path) -> None:
    """Frames/s with and without LiberTEM attached."""
    from bench.plots import figure

    with figure(path, 1, "NodeGroups with a LiberTEM client attached") as (axis,):
        axis.bar([row[0] for row in result.rows], [row[1] for row in result.rows])
        axis.set_ylabel("frames/s (median)")
