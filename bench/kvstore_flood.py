"""Memory: the kvstore server's resident set before and after a snapshot flood (docs/fault-model.md).

A client connects a DEALER to the snapshot port, asks ``ICANHAZ?`` again and again and never reads
(its queue is one message deep). The server holds ``KEYS`` keys of ``VALUE_BYTES`` bytes, about what
a large stack keeps there. Until the snapshot queue was bounded, every reply stayed queued in the
server for such a client; now a reply its client does not read is dropped and counted
(``snapshots_dropped``). Each flood runs against a fresh server; the figure is VmRSS once the server
has answered or dropped every request and its RSS has settled.

``python -m bench.kvstore_flood --sectorflow PATH`` measures another build's ``sectorflow`` (e.g.
the main branch's) with the same flood, for a before/after comparison.

``python -m bench.kvstore_flood --log-cost`` measures instead what the durable records
(kvstore/SPEC.md, "Durable records") cost the server's update rate: one client writes updates of
``VALUE_BYTES`` bytes over ``KEYS`` keys as fast as it can, against a fresh server without a log and
with ``log_fsync`` never, interval and always (the log in a temporary directory), all in one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import tempfile
import time
from pathlib import Path

import msgpack
import zmq

from bench import BenchmarkResult, RunOptions
from bench.config_file import with_free_ports, write_config
from bench.processes import STOP_TIMEOUT_S
from bench.proc_stats import rss_kib
from sectorflow.configs import Config, KvstoreConfig, load_config
from sectorflow.kvstore import Client, client_options
from sectorflow.orchestration import ServiceSpec, Supervisor
from sectorflow.protocol import ServiceStatus, status_key
from sectorflow.waiting import wait_until

log = logging.getLogger(__name__)

DESCRIPTION = "kvstore server RSS before and after a snapshot flood of 200 and 2000 requests from a client that never reads"

FLOODS = (200, 2000)  # ICANHAZ? requests per flood
KEYS = 500
VALUE_BYTES = 300
START_TIMEOUT_S = 30.0
FLOOD_TIMEOUT_S = 300.0  # the server before the bound answered 2000 requests of 500 keys in about a minute
SETTLE_PERIOD_S = 1.0  # RSS is sampled this often until two samples agree
SETTLE_KIB = 512


@dataclasses.dataclass
class FloodRun:
    """One flood against one fresh server."""

    requests: int
    rss_before_kib: int
    rss_after_kib: int
    snapshots: int  # answered whole (a server before the bound answered every one whole)
    snapshots_dropped: int


def server_counters(client: Client) -> dict:
    """The server's own status fields ({} before the first); a server before the bound lacks snapshots_dropped."""
    raw = client.get(status_key("kvstore", "server"))
    return {} if raw is None else ServiceStatus.decode(raw).extra


def settled_rss_kib(pid: int) -> int:
    """VmRSS once two samples SETTLE_PERIOD_S apart differ by less than SETTLE_KIB (at most 30 samples)."""
    previous = rss_kib(pid)
    for _ in range(30):
        time.sleep(SETTLE_PERIOD_S)  # the sampling period of a settling figure, in a benchmark
        current = rss_kib(pid)
        if abs(current - previous) < SETTLE_KIB:
            return current
        previous = current
    return previous


def write_for_any_build(config: Config, path: Path) -> Config:
    """``config`` written to ``path`` without the [kvstore] keys left at their defaults: a build from
    before those keys refuses them as unknown, and reads the same defaults without them."""
    config = write_config(config, path)
    defaults = KvstoreConfig()
    table, lines = "", []
    for line in path.read_text().splitlines():
        table = line if line.startswith("[") else table
        key = line.split(" = ")[0]
        if table == "[kvstore]" and " = " in line and getattr(config.kvstore, key) == getattr(defaults, key) \
                and key.startswith("max_"):
            continue
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return load_config(path)


def flood(config: Config, requests: int, sectorflow: list[str], workdir: Path) -> FloodRun:
    """Start ``sectorflow kvstore`` (the argv prefix ``sectorflow``), fill it, flood it, measure it."""
    config = write_for_any_build(with_free_ports(config), workdir / "config.toml")
    with Supervisor(workdir, STOP_TIMEOUT_S) as processes:
        pid = processes.start(ServiceSpec("kvstore", (*sectorflow, "kvstore", "--config", str(config.source)))).pid
        with Client(client_options(config)) as client:
            if not client.wait_synced(START_TIMEOUT_S):
                raise RuntimeError(f"the kvstore did not answer: {processes.log_tail('kvstore')}")
            value = msgpack.packb("x" * VALUE_BYTES)
            for i in range(KEYS):
                client.set(f"flood/{i:04d}", value)
            wait_until(lambda: len(client.subtree("flood/")) == KEYS, START_TIMEOUT_S, f"{KEYS} keys at the server")
            asked = wait_until(lambda: server_counters(client).get("snapshots"), START_TIMEOUT_S, "the server's status")
            before = settled_rss_kib(pid)

            context = zmq.Context()
            dealer = context.socket(zmq.DEALER)
            dealer.rcvhwm = 1
            dealer.linger = 0
            dealer.connect(f"tcp://127.0.0.1:{config.kvstore.port}")
            try:
                for _ in range(requests):
                    dealer.send_multipart([b"ICANHAZ?", b""])
                done = wait_until(
                    lambda: (c := server_counters(client)) and c["snapshots"] + c.get("snapshots_dropped", 0)
                    >= asked + requests and c, FLOOD_TIMEOUT_S, f"the server to answer or drop {requests} requests")
                after = settled_rss_kib(pid)
            finally:
                dealer.close()
                context.term()
    return FloodRun(requests, before, after, done["snapshots"] - asked, done.get("snapshots_dropped", 0))


def measure(config: Config, sectorflow: list[str]) -> list[FloodRun]:
    runs = []
    for requests in FLOODS:
        with tempfile.TemporaryDirectory(prefix="bench-kvstore-flood-") as work:
            runs.append(flood(config, requests, sectorflow, Path(work)))
        log.info("%d requests: %s", requests, runs[-1])
    return runs


def result_of(runs: list[FloodRun], build: str) -> BenchmarkResult:
    rows = [[run.requests, run.rss_before_kib / 1024, run.rss_after_kib / 1024,
             (run.rss_after_kib - run.rss_before_kib) / 1024, run.snapshots, run.snapshots_dropped] for run in runs]
    return BenchmarkResult(
        columns=["requests", "RSS before MiB", "RSS after MiB", "growth MiB", "answered whole", "dropped"],
        rows=rows,
        notes=[f"{build}; {KEYS} keys of {VALUE_BYTES} bytes in the map; one DEALER with a receive queue of one "
               "message sends every request and reads nothing; VmRSS of the server process once it has answered "
               "or dropped every request and two samples 1 s apart agree within 512 KiB."],
        details={"runs": [dataclasses.asdict(run) for run in runs], "build": build},
    )


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Both floods against this checkout's server; see the module docstring."""
    return result_of(measure(config, [sys.executable, "-m", "sectorflow"]), "this checkout")


def plot(result: BenchmarkResult, path: Path) -> None:
    """RSS before and after each flood, side by side."""
    import numpy as np

    from bench.plots import figure

    runs = result.details["runs"]
    with figure(path, 1, f"kvstore: RSS around a snapshot flood ({result.details['build']})") as (panel,):
        xs = np.arange(len(runs))
        panel.bar(xs - 0.2, [r["rss_before_kib"] / 1024 for r in runs], 0.4, label="before the flood")
        panel.bar(xs + 0.2, [r["rss_after_kib"] / 1024 for r in runs], 0.4, label="after the flood")
        panel.set_xticks(xs, [f"{r['requests']} requests" for r in runs])
        panel.set_ylabel("MiB")
        panel.legend()


@dataclasses.dataclass
class RateRun:
    """Updates through one fresh server with one log policy."""

    log: str  # "off" or the log_fsync policy
    updates: int
    seconds: float  # from the first update sent to the last one published back
    log_bytes: int  # the log directory's bytes at the end (0 without a log)

    @property
    def per_s(self) -> float:
        return self.updates / self.seconds


# Updates per policy: fsync on every record is two orders of magnitude slower.
RATE_UPDATES = {"off": 100_000, "never": 100_000, "interval": 100_000, "always": 5_000}


def update_rate(config: Config, log: str, sectorflow: list[str], workdir: Path) -> RateRun:
    """Write RATE_UPDATES[log] updates through a fresh server with ``log`` and time them."""
    log_dir = workdir / "kvlog"
    kvstore = dataclasses.replace(config.kvstore, log_dir="" if log == "off" else str(log_dir),
                                  log_fsync="interval" if log == "off" else log)
    config = write_config(dataclasses.replace(with_free_ports(config), kvstore=kvstore), workdir / "config.toml")
    updates = RATE_UPDATES[log]
    with Supervisor(workdir, STOP_TIMEOUT_S) as processes:
        processes.start(ServiceSpec("kvstore", (*sectorflow, "kvstore", "--config", str(config.source))))
        with Client(client_options(config)) as writer, Client(client_options(config, "rate/")) as observer:
            for client in (writer, observer):
                if not client.wait_synced(START_TIMEOUT_S):
                    raise RuntimeError(f"the kvstore did not answer: {processes.log_tail('kvstore')}")
            values = [msgpack.packb(f"{i:08d}" + "x" * (VALUE_BYTES - 8)) for i in range(updates)]
            last_key, last_value = f"rate/{(updates - 1) % KEYS:04d}", values[-1]
            start = time.perf_counter()
            for i, value in enumerate(values):
                writer.set_once(f"rate/{i % KEYS:04d}", value)
            wait_until(lambda: observer.get(last_key) == last_value, FLOOD_TIMEOUT_S, "the last update")
            seconds = time.perf_counter() - start
    log_bytes = sum(path.stat().st_size for path in log_dir.iterdir()) if log_dir.exists() else 0
    return RateRun(log, updates, seconds, log_bytes)


def measure_log_cost(config: Config, sectorflow: list[str]) -> list[RateRun]:
    runs = []
    for policy in RATE_UPDATES:
        with tempfile.TemporaryDirectory(prefix="bench-kvstore-log-") as work:
            runs.append(update_rate(config, policy, sectorflow, Path(work)))
        log_line(runs[-1])
    return runs


def log_line(run: RateRun) -> None:
    log.info("log %s: %d updates in %.2f s, %.0f updates/s", run.log, run.updates, run.seconds, run.per_s)


def log_cost_result(runs: list[RateRun], build: str) -> BenchmarkResult:
    base = runs[0].per_s
    rows = [[run.log, run.updates, round(run.seconds, 2), round(run.per_s), f"{run.per_s / base:.2f}",
             run.log_bytes // 1024] for run in runs]
    return BenchmarkResult(
        columns=["log", "updates", "seconds", "updates/s", "vs no log", "files KiB"],
        rows=rows,
        notes=[f"{build}; one client writes updates of {VALUE_BYTES} bytes over {KEYS} keys (set_once) as fast as "
               "it can; seconds from the first sent to the last published back to a second client; a fresh server "
               "per row, its log in a temporary directory; log_max_bytes at its default."],
        details={"runs": [dataclasses.asdict(run) for run in runs], "build": build},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kvstore_flood", description=__doc__.splitlines()[0])
    parser.add_argument("--sectorflow", metavar="PATH", default=None,
                        help="the sectorflow command of the build to measure (default: this checkout's)")
    parser.add_argument("--config", metavar="FILE", default=None, help="configuration (default: configs/local.toml)")
    parser.add_argument("--log-cost", action="store_true",
                        help="measure the update rate without the durable log and with each log_fsync policy instead")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s %(message)s")
    from bench.report import table

    command = [args.sectorflow] if args.sectorflow else [sys.executable, "-m", "sectorflow"]
    build = args.sectorflow or "this checkout"
    if args.log_cost:
        result = log_cost_result(measure_log_cost(load_config(args.config), command), build)
    else:
        result = result_of(measure(load_config(args.config), command), build)
    print(table(result.columns, result.rows))
    for note in result.notes:
        print(f"- {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
