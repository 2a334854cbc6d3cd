"""Failover time of the kvstore pair (kvstore/SPEC.md, "The pair"): kill to the first write
accepted by the new active, over ``TRIALS`` SIGKILLs.

Two ``sectorflow kvstore --pair`` processes on loopback (the configuration's heartbeat and silence
period, durable records in a temporary directory) and one pair client writing ``w/<n>`` (create once,
no ttl) every ``WRITE_PERIOD_S``. Each trial waits until the passive has mirrored the active, SIGKILLs
the active, and times until the first write issued after the kill is in the client's replica, synced
with the other server: the client's silence period, its move, the vote that makes the passive active
(which applies the write from pending) and the write coming back. The killed server is started
again (it becomes the passive and mirrors), and the next trial kills the other one, so the trials
alternate primary and backup. The same as ``tests/integration/test_kvstore_pair_servers.py`` measures
once, as a guard rather than a figure.

``python -m bench.kvstore_failover [--config FILE] [--trials N] [--heartbeat-ms MS]``, or ``python -m
bench --only kvstore_failover``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import msgpack

from bench import BenchmarkResult, RunOptions
from bench.config_file import write_config
from bench.processes import STOP_TIMEOUT_S
from harness import free_port_block
from sectorflow.configs import Config, load_config
from sectorflow.kvstore import Client, client_options
from sectorflow.orchestration import ServiceSpec, Supervisor
from sectorflow.waiting import wait_until

log = logging.getLogger(__name__)

DESCRIPTION = "kvstore pair: SIGKILL of the active to the first write accepted by the new active, 20 trials"

TRIALS = 20
QUICK_TRIALS = 5
WRITE_PERIOD_S = 0.002
START_TIMEOUT_S = 30.0
FAILOVER_TIMEOUT_S = 60.0  # a failure guard, not a figure
MIRRORED = "mirror: snapshot of the active taken"


@dataclasses.dataclass
class Trial:
    killed: str  # "primary" or "backup"
    seconds: float


class Writer:
    """A thread writing w/<n> through the pair client until stopped; ``issued`` is the next n."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.issued = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, name="failover-writer")
        self._thread.start()

    def _write(self) -> None:
        while not self._stop.wait(WRITE_PERIOD_S):  # pacing of the writes, not synchronisation
            self.client.set_once(f"w/{self.issued:07d}", msgpack.packb(self.issued))
            self.issued += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def pair_config(config: Config, workdir: Path, heartbeat_ms: int) -> Config:
    first = free_port_block(config.kvstore.bind_host, 8)
    host = config.kvstore.bind_host
    kvstore = dataclasses.replace(config.kvstore, servers=(f"{host}:{first}", f"{host}:{first + 4}"),
                                  heartbeat_ms=heartbeat_ms, log_dir=str(workdir / "kvlog"))
    return write_config(dataclasses.replace(config, kvstore=kvstore), workdir / "config.toml")


def measure(config: Config, trials: int, heartbeat_ms: int) -> list[Trial]:
    with tempfile.TemporaryDirectory(prefix="kvstore-failover-") as tmp:
        workdir = Path(tmp)
        config = pair_config(config, workdir, heartbeat_ms)
        addresses = dict(zip(("primary", "backup"), config.kvstore.servers))
        with Supervisor(workdir, STOP_TIMEOUT_S) as processes:
            starts = {"primary": 0, "backup": 0}

            def start(pair: str) -> str:
                starts[pair] += 1
                name = f"kvstore-{pair}-{starts[pair]}"
                processes.start(ServiceSpec(name, (sys.executable, "-m", "sectorflow", "kvstore", "--config",
                                                   str(config.source), "--pair", pair)))
                return name

            running = {"primary": start("primary")}
            running["backup"] = start("backup")
            with Client(client_options(config)) as client:
                if not client.wait_synced(START_TIMEOUT_S):
                    raise RuntimeError(f"the pair did not answer: {processes.log_tail(running['primary'])}")
                writer = Writer(client)
                results: list[Trial] = []
                try:
                    active, passive = "primary", "backup"
                    for trial in range(trials):
                        wait_until(lambda: MIRRORED in processes.log_path(running[passive]).read_text(),
                                   START_TIMEOUT_S, f"the {passive} to mirror the {active}")
                        mark = writer.issued
                        wait_until(lambda: client.get(f"w/{mark:07d}") is not None, START_TIMEOUT_S,
                                   "a write on the active")
                        process = processes.process(running[active])
                        killed = time.perf_counter()
                        os.killpg(process.pid, signal.SIGKILL)
                        process.wait()
                        first = writer.issued  # issued after the kill: only the new active can take it
                        wait_until(lambda: client.server == addresses[passive] and client.synced()
                                   and client.get(f"w/{first:07d}") is not None, FAILOVER_TIMEOUT_S,
                                   f"the first write after the kill on the {passive}")
                        seconds = time.perf_counter() - killed
                        results.append(Trial(active, seconds))
                        log.info("trial %d: killed the %s, first write accepted by the %s after %.3f s", trial + 1,
                                 active, passive, seconds)
                        running[active] = start(active)
                        active, passive = passive, active
                finally:
                    writer.stop()
    return results


def result_of(trials: list[Trial], config: Config, heartbeat_ms: int) -> BenchmarkResult:
    seconds = sorted(trial.seconds for trial in trials)
    silence_s = heartbeat_ms * config.kvstore.silence_heartbeats / 1000.0
    rows = [["all", len(seconds), f"{min(seconds):.3f}", f"{statistics.median(seconds):.3f}",
             f"{max(seconds):.3f}", f"{statistics.mean(seconds):.3f}"]]
    for pair in ("primary", "backup"):
        one = [trial.seconds for trial in trials if trial.killed == pair]
        if one:
            rows.append([f"{pair} killed", len(one), f"{min(one):.3f}", f"{statistics.median(one):.3f}",
                         f"{max(one):.3f}", f"{statistics.mean(one):.3f}"])
    return BenchmarkResult(
        columns=["trials", "n", "min s", "median s", "max s", "mean s"],
        rows=rows,
        notes=[f"heartbeat {heartbeat_ms} ms, silence_heartbeats {config.kvstore.silence_heartbeats} (a client's "
               f"silence period {silence_s:g} s; the peer link's 2 heartbeats); one writer every "
               f"{WRITE_PERIOD_S * 1000:g} ms; SIGKILL of the active to the first write issued after it read back "
               "from the new active; trials alternate primary and backup (the killed one restarted as the passive)"],
        details={"seconds": [trial.seconds for trial in trials], "killed": [trial.killed for trial in trials]},
    )


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    heartbeat_ms = config.kvstore.heartbeat_ms
    return result_of(measure(config, QUICK_TRIALS if options.quick else TRIALS, heartbeat_ms), config, heartbeat_ms)


def plot(result: BenchmarkResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 3.5))
    seconds = result.details["seconds"]
    axes.plot(range(1, len(seconds) + 1), seconds, "o-")
    axes.set_xlabel("trial (odd: primary killed, even: backup)")
    axes.set_ylabel("kill to first write accepted (s)")
    axes.set_ylim(bottom=0)
    axes.set_title("kvstore pair failover")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None, help="configuration file (default: configs/local.toml)")
    parser.add_argument("--trials", type=int, default=TRIALS)
    parser.add_argument("--heartbeat-ms", type=int, default=None, help="default: the configuration's")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    config = load_config(args.config)
    heartbeat_ms = args.heartbeat_ms or config.kvstore.heartbeat_ms
    result = result_of(measure(config, args.trials, heartbeat_ms), config, heartbeat_ms)
    print(" | ".join(result.columns))
    for row in result.rows:
        print(" | ".join(str(cell) for cell in row))
    for note in result.notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
