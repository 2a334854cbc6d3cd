"""Transport: one stream of sector-sized two-part messages through five paths, in one run.

(a) raw: ``zmq_hop send`` PUSH -> ``zmq_hop sink`` PULL, one cppzmq hop: the machine's limit;
(b) proxy: sender -> libzmq's own ``zmq_proxy`` (``zmq_hop proxy``) -> sink;
    aggregator: sender -> the ``sectorflow aggregator`` daemon (one relay thread) -> sink, which is
    registered in the kvstore as the scan's only NodeGroup; the relay against (b);
(c) pipeline: ``producer_feed`` (sectorflow's producer library) -> the aggregator daemon -> one
    real NodeGroup with counting switched off (``bench.assembly_sink``: receiver thread, inproc
    hand-off, frame assembly in the pool) at a detector of one sector, so that (c) carries the very
    stream of (a) and (b);
    pipeline, 4 sectors: the same at the configured geometry (4 producers, 4 relay threads, a
    NodeGroup assembling 576 x 576 frames), the same number of messages;
encrypted, beside them in the same run (CurveZMQ, keys made for the run, a kvstore of its own):
    raw-curve: (a) with CURVE (the sink a CURVE server with a ZAP handler, as the aggregator is);
    pipeline-curve-wan: (c) with CURVE on the aggregator -> NodeGroup hop only ([security]
    plain_receivers, the wide-area hop of a deployment);
    pipeline-curve: (c) with CURVE on every hop.

Every path carries ``MESSAGES`` data messages: a header of the real wire format and the same
165,888-byte payload (one 144 x 576 uint16 sector), sent zero-copy. The clock runs at the end of
the path, from the first data message to the last (for (c), to the last frame assembled). The
paths run interleaved, ``ROUNDS`` times each; every run is bounded in messages and in time and
starts its own processes (the kvstore is shared). Beside the rate, each run records the CPU
seconds of every process during the transfer: where the time goes. ``zmq_hop check`` times what
the aggregator does per message beyond a plain relay (decode and check the header as every
receiving thread does, pick a NodeGroup).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench import BenchmarkResult, RunOptions, Target
from bench.config_file import with_free_ports, write_config
from harness import free_port_block
from bench.processes import STOP_TIMEOUT_S, read_json, start_reporting
from bench.proc_stats import cpu_seconds
from bench.programs import build_programs
from bench.ratios import median, per_gb, ratio
from sectorflow.configs import Config, ReceiverConfig, SecurityConfig
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.orchestration import ServiceSpec, Supervisor
from sectorflow.protocol import SERVICE_AGGREGATOR, NodeGroupRecord, nodegroup_key, wall_clock_s
from sectorflow.security.keys import generate
from sectorflow.waiting import wait_until

log = logging.getLogger(__name__)

DESCRIPTION = ("one stream of sector-sized messages: raw cppzmq hop, zmq_proxy, the aggregator, "
               "producer -> aggregator -> NodeGroup (counting off); GB/s")

MESSAGES = 12_000       # data messages per run (2.0 GB)
ROUNDS = 3              # runs of each path, interleaved
RUN_TIMEOUT_S = 60.0    # a run not finished by then fails the benchmark
START_TIMEOUT_S = 30.0  # for a process to say it is ready
SCAN_X = 100            # probe positions per row; the scan has as many rows as the messages need
PEEKS = 10_000_000      # headers zmq_hop check decodes and routes (a few seconds)

PATHS = {
    "raw": "(a) C++ PUSH -> PULL, one hop",
    "proxy": "(b) sender -> libzmq zmq_proxy -> sink",
    "aggregator": "sender -> sectorflow aggregator -> sink",
    "pipeline": "(c) producer -> aggregator -> NodeGroup, counting off",
    "pipeline-4": "(c) at the real geometry: 4 producers -> aggregator -> NodeGroup, counting off",
    "raw-curve": "(a) with CURVE",
    "pipeline-curve-wan": "(c) with CURVE on aggregator -> NodeGroup only",
    "pipeline-curve": "(c) with CURVE on every hop",
}
# The paths whose services run with [security] on (their own kvstore).
SECURED = ("raw-curve", "pipeline-curve-wan", "pipeline-curve")


@dataclass
class Run:
    """One run of one path as its end saw it, and the CPU each process used meanwhile."""

    messages: int
    bytes: int
    seconds: float
    cpu_s: dict[str, float] = field(default_factory=dict)

    @property
    def gb_s(self) -> float:
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def messages_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


def single_sector(config: Config) -> Config:
    """``config`` at a detector of one sector (a frame is one sector): one receiver, one thread."""
    d = config.detector
    return dataclasses.replace(
        config,
        detector=dataclasses.replace(d, frame_rows=d.sector_rows, frame_cols=d.sector_cols),
        receivers=(ReceiverConfig(host=config.receivers[0].host, threads=1),),
    )


class Bench:
    """The shared state of the transport runs: programs, configurations, kvstore."""

    def __init__(self, config: Config, workdir: Path) -> None:
        self.programs = build_programs()
        self.workdir = workdir
        sectors = with_free_ports(dataclasses.replace(
            config, receivers=tuple(ReceiverConfig(host=r.host, threads=1) for r in config.receivers)))
        self.sectors = write_config(sectors, workdir / "sectors.toml")
        self.single = write_config(single_sector(sectors), workdir / "single.toml")
        self.host = self.single.aggregator.bind_host
        self.hwm = config.aggregator.hwm
        self.runs = 0
        self.keys = workdir / "keys"
        for role in ("kvstore", "aggregator", "producer", "nodegroup", "viewer"):
            generate(self.keys, role, "bench")
        on = SecurityConfig(enabled=True, key_dir=str(self.keys))
        secure = with_free_ports(dataclasses.replace(single_sector(sectors), security=on))
        self.secure = write_config(secure, workdir / "secure.toml")
        self.wan = write_config(dataclasses.replace(secure, security=dataclasses.replace(on, plain_receivers=True)),
                                workdir / "wan.toml")

    def sender(self, processes: Supervisor, endpoint: str, route: str | None, curve: bool = False) -> None:
        """Start the C++ sender; with ``route``, it first sends the info message routing to that NodeGroup."""
        argv = [str(self.programs["zmq_hop"]), "send", "--connect", endpoint, "--scan-x", str(SCAN_X),
                "--scan-y", str(MESSAGES // SCAN_X), "--bytes", str(self.single.detector.sector_bytes),
                "--hwm", str(self.hwm), "--timeout-s", str(int(RUN_TIMEOUT_S))]
        argv += ["--key-dir", str(self.keys)] if curve else []
        start_reporting(processes, "sender", argv + (["--route", route] if route else []))

    def sink(self, processes: Supervisor, curve: bool = False) -> str:
        """Start the C++ sink; returns the endpoint it bound."""
        start_reporting(processes, "sink", [str(self.programs["zmq_hop"]), "sink", "--bind", f"tcp://{self.host}:0",
                                            "--messages", str(MESSAGES), "--hwm", str(self.hwm),
                                            "--timeout-s", str(int(RUN_TIMEOUT_S))]
                        + (["--key-dir", str(self.keys)] if curve else []))
        return read_json(processes, "sink", START_TIMEOUT_S)["endpoint"]

    def fresh_ports(self, config: Config) -> Config:
        """``config`` with its aggregator on ports free now, written out for the run: ports picked once
        for the whole benchmark may be taken meanwhile by the OS's ephemeral ports (the sinks bind port 0)."""
        aggregator = dataclasses.replace(config.aggregator,
                                         base_port=free_port_block(config.aggregator.bind_host, config.n_receivers))
        return write_config(dataclasses.replace(config, aggregator=aggregator),
                            self.workdir / f"run-{self.runs:02d}.toml")

    def aggregator(self, processes: Supervisor, client: Client, config: Config) -> None:
        """Start the aggregator daemon of ``config``; returns once every relay thread published its status."""
        started = wall_clock_s()
        processes.start(ServiceSpec("aggregator", (sys.executable, "-m", "sectorflow", "aggregator", "--config",
                                                   config.source)))
        threads = {f"t{r}" for r in range(config.n_receivers)}

        def ready() -> bool:
            if processes.exit_code("aggregator") is not None:
                raise SectorflowError(f"the aggregator exited; its log:\n{processes.log_tail('aggregator')}")
            seen = {name for (_, name), s in client.statuses(SERVICE_AGGREGATOR).items() if s.updated_s >= started}
            return threads <= seen

        wait_until(ready, START_TIMEOUT_S, "aggregator status in the kvstore")

    def feed(self, processes: Supervisor, config: Config, uid: str) -> list[str]:
        """Start one producer_feed per receiver of ``config``, together ``MESSAGES``; returns their names."""
        d = config.detector
        frames = MESSAGES // config.n_receivers
        names = []
        for r in range(config.n_receivers):
            names.append(f"producer-{r}")
            start_reporting(processes, names[-1], [
                str(self.programs["producer_feed"]), "--aggregator",
                f"tcp://{config.aggregator.host}:{config.aggregator.base_port + r}", "--route", uid,
                "--receiver", str(r), "--threads", "1", "--scan-x", str(SCAN_X), "--scan-y", str(frames // SCAN_X),
                "--frame", f"{d.frame_rows}x{d.frame_cols}", "--sector", f"{d.sector_rows}x{d.sector_cols}",
                "--itemsize", str(d.itemsize), "--hwm", str(config.producer.send_hwm),
                "--timeout-s", str(int(RUN_TIMEOUT_S))]
                + (["--key-dir", str(self.keys)] if config.security.enabled and not config.security.plain_receivers
                   else []))
        return names

    def run(self, path: str, client: Client) -> Run:
        """One run of ``path`` with its own processes, all stopped on return (also on error)."""
        self.runs += 1
        uid = f"bench-{path}-{self.runs}"
        relays: list[str] = []  # long-running processes whose CPU is read from /proc around the transfer
        with Supervisor(self.workdir / "logs" / f"{self.runs:02d}-{path}", STOP_TIMEOUT_S) as processes:
            try:
                pipelines = {"pipeline": self.single, "pipeline-4": self.sectors, "pipeline-curve": self.secure,
                             "pipeline-curve-wan": self.wan}
                if path in pipelines:
                    config = self.fresh_ports(pipelines[path])
                    start_reporting(processes, "sink", [sys.executable, "-m", "bench.assembly_sink", "--config",
                                                        config.source, "--uid", uid,
                                                        "--timeout-s", str(int(RUN_TIMEOUT_S))])
                    sink_ready = read_json(processes, "sink", START_TIMEOUT_S)
                    wait_until(lambda: any(r.uid == uid for r in client.nodegroups()), START_TIMEOUT_S,
                               f"NodeGroup {uid} in the kvstore")
                    self.aggregator(processes, client, config)
                    relays.append("aggregator")
                else:
                    entry = self.sink(processes, curve=path == "raw-curve")
                    sink_ready = {}  # the C++ sink's CPU before the data is nil
                    if path == "proxy":
                        start_reporting(processes, "proxy", [str(self.programs["zmq_hop"]), "proxy", "--bind",
                                                             f"tcp://{self.host}:0", "--connect", entry,
                                                             "--hwm", str(self.hwm)])
                        entry = read_json(processes, "proxy", START_TIMEOUT_S)["endpoint"]
                        relays.append("proxy")
                    elif path == "aggregator":
                        port = int(entry.rsplit(":", 1)[1])
                        client.set(nodegroup_key(uid), NodeGroupRecord(uid=uid, host=self.host, ports=[port]).encode(),
                                   self.single.kvstore.ttl_s)
                        config = self.fresh_ports(self.single)
                        self.aggregator(processes, client, config)
                        relays.append("aggregator")
                        entry = f"tcp://{config.aggregator.host}:{config.aggregator.base_port}"
                before = {name: cpu_seconds(processes.process(name).pid) or 0.0 for name in relays}
                if path in pipelines:
                    senders = self.feed(processes, config, uid)
                else:
                    senders = ["sender"]
                    self.sender(processes, entry, uid if path == "aggregator" else None, curve=path == "raw-curve")
                end = read_json(processes, "sink", RUN_TIMEOUT_S + 10)
                cpu = {name: (cpu_seconds(processes.process(name).pid) or 0.0) - before[name] for name in relays}
                for name in senders:
                    cpu[name] = float(read_json(processes, name, RUN_TIMEOUT_S)["cpu_s"])
                    if (code := processes.wait(name, RUN_TIMEOUT_S)) != 0:
                        raise SectorflowError(f"{name} exited with code {code}; last lines of its log:\n"
                                              f"{processes.log_tail(name)}")
                cpu["sink"] = float(end["cpu_s"]) - float(sink_ready.get("cpu_s", 0.0))
                return Run(int(end["messages"]), int(end["bytes"]), float(end["seconds"]), cpu)
            finally:
                if path == "aggregator":
                    client.erase(nodegroup_key(uid))  # a NodeGroup deregisters itself; the C++ sink cannot


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Every path ``ROUNDS`` times, interleaved; see the module docstring."""
    with tempfile.TemporaryDirectory(prefix="bench-transport-") as work:
        bench = Bench(config, Path(work))
        runs: dict[str, list[Run]] = {path: [] for path in PATHS}
        with Supervisor(Path(work) / "logs", STOP_TIMEOUT_S) as services:
            services.start(ServiceSpec("kvstore", (sys.executable, "-m", "sectorflow", "kvstore", "--config",
                                                   bench.single.source)))
            services.start(ServiceSpec("kvstore-secure", (sys.executable, "-m", "sectorflow", "kvstore", "--config",
                                                          bench.secure.source)))
            with Client.from_config(bench.single, name="bench-transport") as client, \
                    Client.from_config(bench.secure, name="bench-transport-secure") as secure_client:
                for name, each in (("kvstore", client), ("kvstore-secure", secure_client)):
                    if not each.wait_synced(START_TIMEOUT_S):
                        raise SectorflowError(f"the {name} did not answer in {START_TIMEOUT_S:g} s; its log:\n"
                                              f"{services.log_tail(name)}")
                for round_ in range(ROUNDS):
                    for path in PATHS:
                        runs[path].append(bench.run(path, secure_client if path in SECURED else client))
                        log.info("round %d, %s: %.2f GB/s", round_ + 1, path, runs[path][-1].gb_s)
            start_reporting(services, "check", [str(bench.programs["zmq_hop"]), "check", "--messages", str(PEEKS)])
            peek_ns = float(read_json(services, "check", RUN_TIMEOUT_S)["ns_per_message"])
    return summarize(runs, config, peek_ns)


def per_round(runs: dict[str, list[Run]], path: str, reference: str) -> list[float]:
    """path / reference in each round: the two ran minutes apart at most, under the same load."""
    return [ratio(a.gb_s, b.gb_s) for a, b in zip(runs[path], runs[reference])]


def summarize(runs: dict[str, list[Run]], config: Config, peek_ns: float) -> BenchmarkResult:
    """The table, ratios, CPU profile and targets of the runs; ``peek_ns``: the aggregator's routing work per message."""
    rows = []
    gb_s = {path: median(r.gb_s for r in path_runs) for path, path_runs in runs.items()}
    profile: dict[str, dict[str, float]] = {}
    for path, path_runs in runs.items():
        best = max(path_runs, key=lambda r: r.gb_s)
        moved = sum(r.bytes for r in path_runs)
        processes = sorted({name for r in path_runs for name in r.cpu_s})
        profile[path] = {name: per_gb(sum(r.cpu_s.get(name, 0.0) for r in path_runs), moved) for name in processes}
        cores = median(sum(r.cpu_s.values()) / r.seconds for r in path_runs if r.seconds > 0)
        rows.append([PATHS[path], gb_s[path], median(r.messages_s for r in path_runs), min(r.gb_s for r in path_runs),
                     best.gb_s, ratio(gb_s[path], gb_s["raw"]), cores,
                     "yes" if all(r.messages == MESSAGES for r in path_runs) else "NO"])
    c_a = ratio(gb_s["pipeline"], gb_s["raw"])
    c_b = ratio(gb_s["pipeline"], gb_s["proxy"])
    agg_b = ratio(gb_s["aggregator"], gb_s["proxy"])
    wan_c = ratio(gb_s["pipeline-curve-wan"], gb_s["pipeline"])
    sector_bytes = config.detector.sector_bytes
    rounds_c_a, rounds_agg_b = per_round(runs, "pipeline", "raw"), per_round(runs, "aggregator", "proxy")
    # GB/s of payload: a payload of B bytes takes B / (GB/s) nanoseconds.
    message_ns = sector_bytes / gb_s["aggregator"] if gb_s["aggregator"] > 0 else 0.0
    notes = [
        f"{MESSAGES:,} two-part messages (header + {sector_bytes:,}-byte payload, zero-copy) per run, {ROUNDS} runs "
        "per path interleaved; medians; every process on tcp 127.0.0.1; GB/s of payload, from the first data "
        "message to the last at the end of the path ((c): to the last frame assembled).",
        f"(c)/(a) = {c_a:.2f}; (c)/(b) = {c_b:.2f}; aggregator/(b) proxy = {agg_b:.2f}; "
        f"(c) at the real geometry/(a) = {ratio(gb_s['pipeline-4'], gb_s['raw']):.2f}; round by round, (c)/(a) "
        + ", ".join(f"{r:.2f}" for r in rounds_c_a) + " and aggregator/proxy " + ", ".join(f"{r:.2f}" for r in rounds_agg_b),
        f"the aggregator's work per message beyond a plain relay's receive and send (decode and check the header, "
        f"pick the NodeGroup; `zmq_hop check`): {peek_ns:.0f} ns, {100 * peek_ns / message_ns:.2f}% of a message's "
        f"{message_ns / 1000:.0f} us at the aggregator's rate" if message_ns > 0 else "no aggregator rate measured",
        f"CurveZMQ: raw hop with CURVE/(a) = {ratio(gb_s['raw-curve'], gb_s['raw']):.2f}; (c) with CURVE on the "
        f"aggregator -> NodeGroup hop/(c) = {wan_c:.2f}, on every hop/(c) = "
        f"{ratio(gb_s['pipeline-curve'], gb_s['pipeline']):.2f}; round by round, WAN hop/(c) "
        + ", ".join(f"{r:.2f}" for r in per_round(runs, "pipeline-curve-wan", "pipeline"))
        + " (every message is encrypted by the sender's and decrypted by the receiver's ZeroMQ I/O thread: "
        "the CPU seconds per GB below say where it goes)",
        f"hwm {config.aggregator.hwm} (aggregator and sinks), producer send_hwm {config.producer.send_hwm}, "
        f"NodeGroup pool {config.nodegroup.pool_frames} frames, {config.nodegroup.counting_threads} assembling "
        "thread(s); (c) uses a detector of one 144 x 576 sector so that it carries the stream of (a) and (b).",
        "cores busy = CPU seconds of every process of the path during the transfer / its duration; CPU seconds "
        "per GB by process: " + "; ".join(
            f"{path}: " + ", ".join(f"{name} {value:.2f}" for name, value in profile[path].items())
            for path in PATHS),
    ]
    targets = [
        Target("transport (c)/(a): producer -> aggregator -> NodeGroup vs one raw hop", ">= 0.45",
               f"{c_a:.2f}", c_a >= 0.45),
        Target("transport: aggregator relay vs libzmq zmq_proxy relay", ">= 1.00", f"{agg_b:.2f}", agg_b >= 1.0),
        Target("security: (c) with CURVE on the aggregator -> NodeGroup hop vs (c) plain", ">= 0.75",
               f"{wan_c:.2f}", wan_c >= 0.75),
    ]
    return BenchmarkResult(
        columns=["path", "GB/s (median)", "messages/s (median)", "GB/s min", "GB/s max", "/ (a)", "cores busy",
                 "all arrived"],
        rows=rows, notes=notes, targets=targets,
        details={"messages": MESSAGES, "rounds": ROUNDS, "gb_s": gb_s, "ratio_c_a": c_a, "ratio_c_b": c_b,
                 "ratio_aggregator_proxy": agg_b, "ratio_wan_curve": wan_c, "rounds_c_a": rounds_c_a, "rounds_aggregator_proxy": rounds_agg_b,
                 "peek_ns_per_message": peek_ns, "cpu_s_per_gb": profile,
                 "runs": {path: [dataclasses.asdict(r) for r in path_runs] for path, path_runs in runs.items()}},
    )


def plot(result: BenchmarkResult, path: Path) -> None:
    """GB/s per path (bars, the min-max range as error bars) and CPU seconds per GB by process."""
    from bench.plots import figure

    details = result.details
    names = list(details["gb_s"])
    runs = details["runs"]
    with figure(path, 2, "transport: one stream of 165,888-byte messages over tcp loopback") as (left, right):
        values = [details["gb_s"][n] for n in names]
        low = [v - min(Run(**r).gb_s for r in runs[n]) for v, n in zip(values, names)]
        high = [max(Run(**r).gb_s for r in runs[n]) - v for v, n in zip(values, names)]
        left.bar(names, values, yerr=[low, high], color="tab:blue", capsize=4)
        left.set_ylabel("GB/s (median of runs, min-max bars)")
        left.tick_params(axis="x", rotation=20)
        processes = sorted({p for n in names for p in details["cpu_s_per_gb"][n]})
        bottom = [0.0] * len(names)
        for process in processes:
            heights = [details["cpu_s_per_gb"][n].get(process, 0.0) for n in names]
            right.bar(names, heights, bottom=bottom, label=process)
            bottom = [b + h for b, h in zip(bottom, heights)]
        right.set_ylabel("CPU seconds per GB moved")
        right.legend(fontsize=8)
        right.tick_params(axis="x", rotation=20)
