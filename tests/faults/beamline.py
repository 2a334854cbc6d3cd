"""The beamline the fault tests break: the whole local stack at the 4D Camera geometry, started by one
Supervisor (real processes, PIDs this test started), a scan acquired with ``sectorflow acquire --wait``,
and the physical evidence every account is checked against.

An account is only believed when the places agree: ``counted`` must equal the sectors the HDF5 file
holds (positions minus its missing positions and the sectors its incomplete frames lack), ``spilled``
the whole records in the raw files on disk, and counted + spilled + missing the scan's sectors.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness import acquire_command

from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client
from sectorflow.orchestration.readiness import sectors_sent
from sectorflow.orchestration.stack import start_stack
from sectorflow.orchestration.supervisor import Supervisor
from sectorflow.protocol import RAW_HEADER_BYTES
from sectorflow.waiting import wait_until

RANKS = 2
READY_S = 120.0
SCAN_S = 180.0
# A streamed scan's account line, or a scan's written to disk for want of a NodeGroup ("N on disk").
ACCOUNT = re.compile(r"scan (\d+): ([a-z ,]+): (?:(\d+) counted \+ (\d+) spilled|(\d+) on disk) \+ (\d+) missing = "
                     r"(\d+) sectors(?:; file (\S+))?")
# A receiver's line of the breakdown: its fates, then where its missing sectors were last seen.
RECEIVER = re.compile(r"^  receiver (\d+): ([^(]*?)(?: \((.*)\))?$", re.MULTILINE)
MISSING = re.compile(r"(\d+) missing")


@dataclass
class Outcome:
    """What ``sectorflow acquire --wait`` said: its exit code and its account line."""

    exit_code: int
    outcome: str
    counted: int
    spilled: int
    missing: int
    sectors: int
    output: str
    path: Path | None  # the counted file the account names
    on_disk: int = 0   # in raw files as planned: no NodeGroup was registered

    def reasons(self) -> dict[int, tuple[int, list[str]]]:
        """Receiver -> (its missing sectors, the reasons the account gives for them)."""
        found = {}
        for match in RECEIVER.finditer(self.output):
            receiver, fates, reasons = match.groups()
            missing = MISSING.search(fates)
            found[int(receiver)] = (int(missing.group(1)) if missing else 0, reasons.split("; ") if reasons else [])
        return found

    def row(self, fault: str, sent: int) -> str:
        """One row of the fault table: fault, sent, counted, spilled, missing, exit code."""
        return (f"| {fault} | {self.sectors} | {sent} | {self.counted} | {self.spilled + self.on_disk} | {self.missing} | "
                f"{self.outcome} | {self.exit_code} |")


class Beamline:
    """The stack of one configuration under one Supervisor, and what a fault test asks of it."""

    def __init__(self, config: Config, config_path: Path, run_dir: Path) -> None:
        self.config, self.config_path, self.run_dir = config, config_path, run_dir
        self.output_dir = Path(config.nodegroup.output_dir)
        self.raw_dir = Path(config.producer.fallback_dir)
        self.supervisor: Supervisor | None = None

    def start(self, with_nodegroups: bool = True) -> Supervisor:
        self.supervisor = start_stack(self.config, self.run_dir, RANKS, self.output_dir, with_nodegroups, READY_S)
        return self.supervisor

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop_all()

    def acquire(self, scan: int, shape: str, rate_hz: float, *extra: str) -> subprocess.Popen[str]:
        """``sectorflow acquire --wait`` in the background; ``finish`` collects it."""
        return subprocess.Popen(acquire_command(self.config_path, scan, shape, rate_hz, SCAN_S, *extra),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    @staticmethod
    def finish(process: subprocess.Popen[str]) -> Outcome:
        output, _ = process.communicate(timeout=SCAN_S + 60)
        match = ACCOUNT.search(output)
        assert match is not None, f"acquire printed no account (exit {process.returncode}):\n{output[-3000:]}"
        _, outcome, counted, spilled, on_disk, missing, sectors, path = match.groups()
        return Outcome(process.returncode, outcome, int(counted or 0), int(spilled or 0), int(missing), int(sectors),
                       output, Path(path) if path else None, int(on_disk or 0))

    def sent(self, scan: int) -> int:
        """Sectors the producer threads report sent for ``scan`` so far (their statuses)."""
        with Client.from_config(self.config, name="fault-test") as client:
            client.wait_synced(10.0)
            return sectors_sent(client, scan)

    def wait_sent(self, client: Client, scan: int, at_least: int) -> None:
        """Waits until the producers sent ``at_least`` sectors of ``scan``: the fault then hits mid-scan."""

        def enough() -> bool:
            return sectors_sent(client, scan) >= at_least

        wait_until(enough, SCAN_S, f"{at_least} sectors of scan {scan} sent")

    def rank_pids(self, client: Client) -> dict[int, int]:
        """MPI rank -> PID of the NodeGroup process (the uid is ``<node>-<pid>-r<rank>-g<index>``)."""
        return {record.rank: int(record.uid.rsplit("-", 3)[1]) for record in client.nodegroups()}

    def kill(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)

    def restart(self, name: str, kill: bool = True) -> None:
        """Ends the service ``name`` (SIGKILL, or a clean stop) and starts it again as ``<name>-again``."""
        assert self.supervisor is not None
        spec = self.supervisor.spec(name)
        if kill:
            self.kill(self.supervisor.process(name).pid)
        else:
            self.supervisor.stop(name)
        self.supervisor.start(replace(spec, name=f"{name}-again"))

    def checksums(self) -> dict[str, str]:
        """SHA-256 of every file in the output and raw directories: what no later fault may change."""
        sums = {}
        for directory in (self.output_dir, self.raw_dir):
            if directory.is_dir():
                for path in sorted(directory.rglob("*")):
                    if path.is_file():
                        sums[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        return sums

    def sectors_in_file(self, path: Path) -> int:
        """The sectors the counted file holds: every position's, less those its completeness lists lack."""
        counted = read_counted_scan(path)
        positions = counted.scan_shape[0] * counted.scan_shape[1]
        receivers = self.config.n_receivers
        lacking = sum(len(sectors) for sectors in counted.incomplete_missing_sectors)
        return (positions - len(counted.missing_positions)) * receivers - lacking

    def records_on_disk(self, scan: int) -> int:
        """Whole sector records in the raw files of ``scan`` (partial ones included: their records are whole)."""
        record = RAW_HEADER_BYTES + self.config.detector.sector_bytes
        return sum(path.stat().st_size // record for path in self.raw_dir.glob(f"*{scan:010d}*"))


def config_overrides(**sections: Any) -> dict[str, Any]:
    """Small, quick-to-fail settings for fault tests, with ``sections`` on top."""
    overrides: dict[str, Any] = {
        "nodegroup": {"scan_timeout_s": 10.0, "pool_frames": 64},
        "logging": {"level": "INFO"},
    }
    for name, values in sections.items():
        if isinstance(values, list):  # an array of tables ([[receivers]]) is replaced whole
            overrides[name] = values
        else:
            overrides.setdefault(name, {}).update(values)
    return overrides


# A kvstore pair on one host: each server uses P .. P + 3 (P + 3: the peer link).
PAIR_PORTS = 4
# The facility's lease on the tests' kvstore heartbeat (200 ms, tests/conftest.py): above the 1.6 s
# that a kvstore failover needs (configs.schema.min_takeover_s), short enough that a dead
# aggregator's scan of a few seconds still has time left for the standby.
FACILITY_TAKEOVER_S = 3.0


def facility_sections(host: str, first_port: int, key_dir: Path, log_dir: Path) -> dict[str, Any]:
    """The stack as a facility runs it, every safety feature on together: a kvstore pair on ``first_port``
    and the next block, a standby aggregator on ``host``, [security] with the keys of ``key_dir``, two
    threads per receiver, and receiver 0 speaking the detector's native header."""
    return {
        "kvstore": {"servers": [f"{host}:{first_port}", f"{host}:{first_port + PAIR_PORTS}"],
                    "log_dir": str(log_dir)},
        "aggregator": {"standby_host": host, "takeover_s": FACILITY_TAKEOVER_S},
        "security": {"enabled": True, "key_dir": str(key_dir)},
        "receivers": [{"host": host, "threads": 2, "wire": "native" if receiver == 0 else "sectorflow"}
                      for receiver in range(4)],
    }
