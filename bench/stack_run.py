"""One scan through the whole local stack, as ``sectorflow demo`` runs it, with what benchmarks need.

The stack of a configuration variant (kvstore, aggregator, NodeGroups under ``mpiexec``, one
producer daemon per receiver, each a process) starts on ports free now, acquires one simulated
scan and waits for its counted HDF5 file; the time is the demo's, from the acquisition request
to the file on disk. Before the stack stops, the peak resident memory (VmHWM) of every service
process is read from /proc, the MPI ranks below ``mpiexec`` included. Every service is stopped on
return, also on error.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration import load_running
from sectorflow.orchestration.stack import start_stack
from sectorflow.orchestration.summary import summarize
from sectorflow.operations.acquire import publish_request
from sectorflow.waiting import WaitTimeout, wait_until

from bench.config_file import with_free_ports, write_config
from bench.proc_stats import command_line, cpu_seconds, peak_rss_kib, process_tree

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0
SCAN_NUMBER = 1
POLL_S = 0.05  # period of the wait for the counted file


@dataclass(frozen=True)
class StackScan:
    """What one scan through the stack gave."""

    scan_x: int
    scan_y: int
    frames: int
    raw_bytes: int
    seconds_to_file: float  # acquisition request to HDF5 file on disk
    complete: int
    incomplete: int
    missing: int
    events_per_frame: float
    peak_rss_kib: dict[str, int] = field(default_factory=dict)  # service -> VmHWM
    cpu_s: dict[str, float] = field(default_factory=dict)  # service -> CPU seconds from request to file

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.seconds_to_file if self.seconds_to_file > 0 else 0.0

    @property
    def gb_s(self) -> float:
        return self.raw_bytes / self.seconds_to_file / 1e9 if self.seconds_to_file > 0 else 0.0


def rank_of(pid: int) -> int | None:
    """The MPI rank of a process started by mpiexec (hydra's PMI_RANK), None if it has none."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for entry in environ:
        if entry.startswith(b"PMI_RANK="):
            return int(entry.split(b"=", 1)[1])
    return None


def service_pids(run_dir: Path) -> dict[str, int]:
    """The pid of every service recorded in ``run_dir``; NodeGroups as ``nodegroup r<rank>`` (the
    ranks below mpiexec)."""
    pids: dict[str, int] = {}
    for service in load_running(run_dir):
        if service.name == "nodegroups":
            ranks = {rank: pid for pid in process_tree(service.pid)
                     if (rank := rank_of(pid)) is not None and "nodegroup" in command_line(pid)}
            pids.update({f"nodegroup r{rank}": ranks[rank] for rank in sorted(ranks)})
        else:
            pids[service.name] = service.pid
    return pids


def service_peaks(pids: dict[str, int]) -> dict[str, int]:
    """VmHWM (KiB) of every live service of ``pids``."""
    return {name: kib for name, pid in pids.items() if (kib := peak_rss_kib(pid)) is not None}


def service_cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of every live service of ``pids``."""
    return {name: seconds for name, pid in pids.items() if (seconds := cpu_seconds(pid)) is not None}


def run_stack_scan(config: Config, scan_x: int, scan_y: int, workdir: Path, *, ranks: int = 2,
                   timeout_s: float = 900.0, counting: bool = True) -> StackScan:
    """Start the stack of ``config`` (on free ports) with ``ranks`` NodeGroup ranks, acquire one
    ``scan_x`` x ``scan_y`` scan, wait for its file, read the services' peak memory, stop the stack.
    Without ``counting`` the NodeGroups assemble the frames and write them with no events.

    Raises SectorflowError if a service dies or the file is not there after ``timeout_s``.
    """
    # The kvstore's durable records in this run's folder (local.toml's runs/local/kvstore is the
    # working directory's): every run starts with no scan, so scan SCAN_NUMBER is never "acquired before".
    config = dataclasses.replace(config, kvstore=dataclasses.replace(config.kvstore, log_dir=str(workdir / "kv")))
    config = write_config(with_free_ports(config), workdir / "config.toml")
    output_dir = workdir / "counted"
    run_dir = workdir / "run"
    output_dir.mkdir(parents=True, exist_ok=True)
    supervisor = start_stack(config, run_dir, ranks, output_dir, True, READY_TIMEOUT_S, counting=counting)
    try:
        path = output_dir / scan_file_name(SCAN_NUMBER)
        pids = service_pids(run_dir)
        with Client.from_config(config, name="bench") as client:
            cpu_before = service_cpu(pids)
            started = time.monotonic()
            publish_request(client, config, SCAN_NUMBER, scan_x, scan_y, config.simulator.rate_hz)

            def written() -> bool:
                supervisor.check()  # a dead service raises at once instead of running out the clock
                return path.exists()

            try:
                wait_until(written, timeout_s, f"{path}", POLL_S)
            except WaitTimeout as timeout:
                raise SectorflowError(f"scan {SCAN_NUMBER} ({scan_x} x {scan_y}): {timeout}; "
                                      f"see the service logs in {run_dir}") from None
            seconds = time.monotonic() - started
            cpu_after = service_cpu(pids)
        peaks = service_peaks(pids)
    finally:
        supervisor.stop_all()
    summary = summarize(config, SCAN_NUMBER, read_counted_scan(path), path, seconds, None)
    log.info("%d x %d: %.1f s to file, %.0f frames/s", scan_x, scan_y, seconds, summary.frames_per_s)
    return StackScan(scan_x, scan_y, summary.frames, summary.raw_bytes, seconds, summary.complete,
                     summary.incomplete, summary.missing, summary.events_per_frame, peaks,
                     {name: cpu_after[name] - cpu_before[name] for name in cpu_after if name in cpu_before})
