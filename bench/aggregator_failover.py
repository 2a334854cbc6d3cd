"""Aggregator failover: the active aggregator SIGKILLed mid-scan with a standby running, ``TRIALS`` times
on one local stack (configs/local.toml's, ``[aggregator] standby_host`` = 127.0.0.1, two NodeGroup ranks).

Each trial acquires a paced scan (``sectorflow acquire --wait``), kills the lease holder once a quarter
of the scan is sent, and reads from the lease record (``status/aggregator/active``) when the standby
took the lease (``since_s``) and when it routed its first sector (``first_routed_s``, sampled by the
daemon's main loop every ``POLL_INTERVAL_S``, 0.1 s); the wall clock of the kill is this process's.
The killed aggregator is then started again and must register as the standby before the next trial,
which kills the other one. The scan's account (counted, missing) is kept for each trial.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import BenchmarkResult, RunOptions
from bench.config_file import with_free_ports, write_config
from bench.ratios import median
from harness import acquire_command
from sectorflow.aggregator.lease import LEASE_KEY, STANDBY_PREFIX, decode_lease
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.orchestration.readiness import sectors_sent
from sectorflow.orchestration.stack import start_stack
from sectorflow.orchestration.supervisor import ServiceSpec, Supervisor
from sectorflow.protocol import SERVICE_AGGREGATOR, ServiceStatus
from sectorflow.waiting import wait_until

log = logging.getLogger(__name__)

DESCRIPTION = "aggregator failover: active SIGKILLed mid-scan, time to the standby's lease and first routed sector"

TRIALS, QUICK_TRIALS = 20, 5
SHAPE, POSITIONS, RATE_HZ = "32x32", 1024, 200.0  # about 5 s a scan: data still flows after the takeover
WAIT_S = 120.0
SCAN_TIMEOUT_S = 5.0
ACCOUNT = re.compile(r"(\d+) counted \+ (\d+) spilled \+ (\d+) missing = (\d+) sectors")


def _aggregator(config_path: Path) -> tuple[str, ...]:
    return (sys.executable, "-m", "sectorflow", "aggregator", "--config", str(config_path), "--standby")


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    trials = QUICK_TRIALS if options.quick else TRIALS
    with tempfile.TemporaryDirectory(prefix="sectorflow-failover-") as tmp:
        work = Path(tmp)
        config = dataclasses.replace(
            config, kvstore=dataclasses.replace(config.kvstore, log_dir=str(work / "kv")),
            aggregator=dataclasses.replace(config.aggregator, standby_host="127.0.0.1"),
            producer=dataclasses.replace(config.producer, fallback_dir=str(work / "raw")),
            # A scan that lost what the dead process held ends by this timeout: its account then comes.
            nodegroup=dataclasses.replace(config.nodegroup, scan_timeout_s=SCAN_TIMEOUT_S))
        config = write_config(with_free_ports(config), work / "config.toml")
        supervisor = start_stack(config, work / "run", 2, work / "counted", True, WAIT_S)
        rows = []
        try:
            with Client.from_config(config, name="bench") as client:
                client.wait_synced(30.0)
                for trial in range(1, trials + 1):
                    rows.append(_trial(config, client, supervisor, trial))
                    log.info("trial %d: lease after %.2f s, first sector routed after %.2f s, %d missing",
                             *rows[-1][:4])
        finally:
            supervisor.stop_all()
    takeover = [row[1] for row in rows]
    routed = [row[2] for row in rows]
    notes = [f"{len(rows)} trials, [aggregator] takeover_s {config.aggregator.takeover_s:g}, "
             f"[kvstore] heartbeat_ms {config.kvstore.heartbeat_ms}",
             f"kill -> standby holds the lease: median {median(takeover):.2f} s, min {min(takeover):.2f}, "
             f"max {max(takeover):.2f}",
             f"kill -> first sector routed by the standby: median {median(routed):.2f} s, min {min(routed):.2f}, "
             f"max {max(routed):.2f} (sampled every 0.1 s)",
             f"missing sectors per scan of {POSITIONS * config.n_receivers}: "
             f"{min(row[3] for row in rows)} to {max(row[3] for row in rows)}"]
    return BenchmarkResult(["trial", "lease_s", "first_routed_s", "missing", "counted"], rows, notes,
                           details={"trials": len(rows)})


def _trial(config: Config, client: Client, supervisor: Supervisor, trial: int) -> list:
    def lease() -> ServiceStatus | None:
        return decode_lease(client.get(LEASE_KEY))

    def standby_pids() -> set[int]:
        return {int(s.extra["pid"]) for (_, name), s in client.statuses(SERVICE_AGGREGATOR).items()
                if name.startswith(STANDBY_PREFIX)}

    wait_until(lambda: lease() is not None and standby_pids(), WAIT_S, "an active aggregator and a standby")
    active, standby = int(lease().extra["pid"]), next(iter(standby_pids()))
    acquire = subprocess.Popen(acquire_command(Path(config.source), trial, SHAPE, RATE_HZ, WAIT_S),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_until(lambda: sectors_sent(client, trial) >= POSITIONS * config.n_receivers // 4, WAIT_S,
               f"a quarter of scan {trial} sent")
    killed_s = time.time()
    os.kill(active, signal.SIGKILL)

    def routed() -> ServiceStatus | None:
        record = lease()
        if record is None or record.extra.get("pid") != standby or "first_routed_s" not in record.extra:
            return None
        return record

    record = wait_until(routed, WAIT_S, f"the standby (pid {standby}) to route a sector")
    output, _ = acquire.communicate(timeout=WAIT_S)
    match = ACCOUNT.search(output)
    if match is None:
        raise SectorflowError(f"trial {trial}: acquire printed no account:\n{output[-2000:]}")
    counted, _spilled, missing, _sectors = (int(g) for g in match.groups())
    supervisor.start(ServiceSpec(f"aggregator-{trial}", _aggregator(Path(config.source))))
    return [trial, round(float(record.extra["since_s"]) - killed_s, 3),
            round(float(record.extra["first_routed_s"]) - killed_s, 3), missing, counted]


def plot(result: BenchmarkResult, path: Path) -> None:
    from bench.plots import figure

    with figure(path, 1, "aggregator failover: from SIGKILL of the active") as (panel,):
        trials = [row[0] for row in result.rows]
        panel.plot(trials, [row[1] for row in result.rows], "o-", label="standby holds the lease")
        panel.plot(trials, [row[2] for row in result.rows], "s-", label="first sector routed by the standby")
        panel.set_xlabel("trial")
        panel.set_ylabel("s")
        panel.legend()
