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
    proxy-curve: (b) with CURVE on both sides of zmq_proxy (it decrypts and encrypts, as the
    aggregator does in pipeline-curve);
    pipeline-curve-wan: (c) with CURVE on the aggregator -> NodeGroup hop only ([security]
    plain_receivers, the wide-area hop of a deployment);
    pipeline-curve: (c) with CURVE on every hop.

Every path carries ``MESSAGES`` data messages: a header of the real wire format and the same
165,888-byte payload (one 144 x 576 uint16 sector), sent zero-copy. The clock runs at the end of
the path, from the first data message to the last (for (c), to the last frame assembled). The
paths run interleaved, ``ROUNDS`` times each; every run is bounded in messages and in time and
starts its own processes (the kvstore is shared). Beside the rate, each run records the CPU
seconds of every process during the transfer, and CPU seconds per GB is the currency of the
results: each service of (c) against its anchor in the same run (bench/cpu_per_gb.py),
each encrypted hop against its plain hop plus the cipher's own cost (``cipher_floor``: libsodium
on one core), and the cores the full detector needs (bench/full_detector.py, with bench/counting.py's
counting cost per frame). ``zmq_hop check`` times what the aggregator does per message beyond a
plain relay (decode and check the header as every receiving thread does, pick a NodeGroup). The
relays and the NodeGroup are also read thread by thread (/proc, by the threads' names), which says
where each one's CPU goes: libzmq's I/O threads, the relay thread, the receiver and counting threads.
"""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench import BenchmarkResult, RunOptions, Table, full_detector
from bench.counting import seconds_per_frame as counting_seconds_per_frame
from bench.cpu_per_gb import (ENCRYPTED_GOAL, PAIRINGS, Comparison, Floor, RunCpu, compare, hops,
                              path_cpu_per_gb, process_cpu_per_gb, per_round as cpu_rounds, targets)
from bench.config_file import with_free_ports, write_config
from harness import free_port_block
from bench.processes import STOP_TIMEOUT_S, read_json, start_reporting
from bench.proc_stats import cpu_seconds, thread_cpu_seconds
from bench.programs import build_programs
from bench.full_detector import Costs
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
               "producer -> aggregator -> NodeGroup (counting off), plain and CURVE; CPU seconds per GB of "
               "each service vs its anchor, and the cores of the full detector")

MESSAGES = 12_000       # data messages per run (2.0 GB)
ROUNDS = 5              # runs of each path, interleaved (medians: the spread between runs is large)
RUN_TIMEOUT_S = 60.0    # a run not finished by then fails the benchmark
START_TIMEOUT_S = 30.0  # for a process to say it is ready
SCAN_X = 100            # probe positions per row; the scan has as many rows as the messages need
PEEKS = 10_000_000      # headers zmq_hop check decodes and routes (a few seconds)
CIPHER_MESSAGES = 2_000  # sector-sized messages cipher_floor seals and opens per repetition (0.33 GB)
CIPHER_REPEATS = 5

PATHS = {
    "raw": "(a) C++ PUSH -> PULL, one hop",
    "proxy": "(b) sender -> libzmq zmq_proxy -> sink",
    "aggregator": "sender -> sectorflow aggregator -> sink",
    "pipeline": "(c) producer -> aggregator -> NodeGroup, counting off",
    "pipeline-4": "(c) at the real geometry: 4 producers -> aggregator -> NodeGroup, counting off",
    "raw-curve": "(a) with CURVE",
    "proxy-curve": "(b) with CURVE on both sides of zmq_proxy",
    "pipeline-curve-wan": "(c) with CURVE on aggregator -> NodeGroup only",
    "pipeline-curve": "(c) with CURVE on every hop",
}
# The paths whose services run with [security] on (their own kvstore).
SECURED = ("raw-curve", "proxy-curve", "pipeline-curve-wan", "pipeline-curve")


@dataclass
class Run:
    """One run of one path as its end saw it, and the CPU each process used meanwhile."""

    messages: int
    bytes: int
    seconds: float
    cpu_s: dict[str, float] = field(default_factory=dict)
    # process -> thread name -> CPU seconds during the transfer, for the relays and the NodeGroup
    threads: dict[str, dict[str, float]] = field(default_factory=dict)

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
        # Two kvstores run side by side (plain and secure), in memory: a configured [kvstore] log_dir
        # would be one directory for both (the second refuses it) and the runs' records need no disk.
        sectors = with_free_ports(dataclasses.replace(
            config, receivers=tuple(ReceiverConfig(host=r.host, threads=1) for r in config.receivers),
            kvstore=dataclasses.replace(config.kvstore, log_dir="")))
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
                    read_json(processes, "sink", START_TIMEOUT_S)
                    wait_until(lambda: any(r.uid == uid for r in client.nodegroups()), START_TIMEOUT_S,
                               f"NodeGroup {uid} in the kvstore")
                    self.aggregator(processes, client, config)
                    relays.append("aggregator")
                else:
                    curve = path in SECURED
                    entry = self.sink(processes, curve=curve)
                    if path in ("proxy", "proxy-curve"):
                        start_reporting(processes, "proxy", [str(self.programs["zmq_hop"]), "proxy", "--bind",
                                                             f"tcp://{self.host}:0", "--connect", entry,
                                                             "--hwm", str(self.hwm)]
                                        + (["--key-dir", str(self.keys)] if curve else []))
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
                # The NodeGroup's sink is read here too, not from the line it printed when ready: between the
                # two it idled while the aggregator started, which is no cost of the transfer (the C++ sinks
                # start as the data does).
                measured = relays + (["sink"] if path in pipelines else [])
                before = {name: cpu_seconds(processes.process(name).pid) or 0.0 for name in measured}
                threads_before = {name: thread_cpu_seconds(processes.process(name).pid) for name in measured}
                if path in pipelines:
                    senders = self.feed(processes, config, uid)
                else:
                    senders = ["sender"]
                    self.sender(processes, entry, uid if path == "aggregator" else None, curve=path in SECURED)
                end = read_json(processes, "sink", RUN_TIMEOUT_S + 10)
                cpu = {name: (cpu_seconds(processes.process(name).pid) or 0.0) - before[name] for name in relays}
                threads_after = {name: thread_cpu_seconds(processes.process(name).pid) for name in relays}
                if "threads" in end:  # the NodeGroup's, read by itself as it ended
                    threads_after["sink"] = {str(k): float(v) for k, v in end["threads"].items()}
                for name in senders:
                    cpu[name] = float(read_json(processes, name, RUN_TIMEOUT_S)["cpu_s"])
                    if (code := processes.wait(name, RUN_TIMEOUT_S)) != 0:
                        raise SectorflowError(f"{name} exited with code {code}; last lines of its log:\n"
                                              f"{processes.log_tail(name)}")
                cpu["sink"] = float(end["cpu_s"]) - before.get("sink", 0.0)
                threads = {name: {thread: seconds - threads_before[name].get(thread, 0.0)
                                  for thread, seconds in after.items()}
                           for name, after in threads_after.items()}
                return Run(int(end["messages"]), int(end["bytes"]), float(end["seconds"]), cpu, threads)
            finally:
                if path == "aggregator":
                    client.erase(nodegroup_key(uid))  # a NodeGroup deregisters itself; the C++ sink cannot


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Every path ``ROUNDS`` times, interleaved, then the cipher floor and the counting cost (module docstring)."""
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
            start_reporting(services, "cipher", [str(bench.programs["cipher_floor"]), "--bytes",
                                                 str(config.detector.sector_bytes), "--messages",
                                                 str(CIPHER_MESSAGES), "--repeats", str(CIPHER_REPEATS)])
            cipher = read_json(services, "cipher", RUN_TIMEOUT_S)
    floor = Floor(seal=float(cipher["seal_cpu_s_per_gb"]), open=float(cipher["open_cpu_s_per_gb"]))
    counting = {dose: counting_seconds_per_frame(config, dose) for dose in full_detector.DOSES}
    return summarize(runs, config, peek_ns, floor, counting)


def per_round(runs: dict[str, list[Run]], path: str, reference: str) -> list[float]:
    """path / reference in each round: the two ran minutes apart at most, under the same load."""
    return [ratio(a.gb_s, b.gb_s) for a, b in zip(runs[path], runs[reference])]


# The processes whose CPU is shown thread by thread (path, process): what explains the two plain targets.
THREAD_PROFILE = (("proxy", "proxy"), ("aggregator", "aggregator"), ("pipeline", "aggregator"), ("pipeline", "sink"))
THREAD_SHOWN = 0.005  # CPU-s/GB below which a thread is left out of the table


def thread_rows(runs: dict[str, list[Run]]) -> list[list[object]]:
    """Per (path, process) of THREAD_PROFILE, each thread's CPU per GB (median of the rounds) and its share
    of the process's; a process whose threads were not read (the C++ sinks: they exit as they report) has none."""
    rows: list[list[object]] = []
    for path, process in THREAD_PROFILE:
        path_runs = [r for r in runs.get(path, []) if process in r.threads]
        if not path_runs:
            continue
        whole = median(per_gb(r.cpu_s.get(process, 0.0), r.bytes) for r in path_runs)
        names = sorted({name for r in path_runs for name in r.threads[process]})
        for name in names:
            value = median(per_gb(r.threads[process].get(name, 0.0), r.bytes) for r in path_runs)
            if value >= THREAD_SHOWN:
                rows.append([f"{path}: {process}", name, value, f"{100 * ratio(value, whole):.0f}%"])
    return rows


def cpu_figures(runs: dict[str, list[Run]]) -> dict[str, list[RunCpu]]:
    """Each path's runs as bench.cpu_per_gb reads them: (CPU seconds by process, bytes moved)."""
    return {path: [(r.cpu_s, r.bytes) for r in path_runs] for path, path_runs in runs.items()}


def comparison_rows(comparisons: list[Comparison], gb_s: dict[str, float]) -> list[list[object]]:
    """The main table: each service against its anchor, plain and with CURVE."""
    goals = {p.service: p.goal for p in PAIRINGS}
    rows: list[list[object]] = []
    for c in comparisons:
        goal = "-"
        if c.curve:
            goal = f"<= {ENCRYPTED_GOAL:.2f} of plain + floor (hop targets below)"
        elif goals[c.service] > 0:
            goal = f"<= {goals[c.service]:.2f}"
        rows.append([
            c.service, "yes" if c.curve else "no", f"{c.service_at[0]}: {c.service_at[1]}", c.cpu,
            f"{c.anchor} ({c.anchor_at[0]})", c.anchor_cpu,
            f"{c.ratio:.2f} (" + ", ".join(f"{r:.2f}" for r in c.rounds) + ")", goal,
            c.floor if c.curve else "-", c.over_plain if c.curve else "-", c.anchor_over_plain if c.curve else "-",
            gb_s[c.service_at[0]], gb_s[c.anchor_at[0]],
        ])
    return rows


def summarize(runs: dict[str, list[Run]], config: Config, peek_ns: float, floor: Floor,
              counting: dict[int, float]) -> BenchmarkResult:
    """The tables, ratios, CPU profile and targets of the runs; ``peek_ns``: the aggregator's routing work per
    message; ``floor``: the cipher's CPU per GB; ``counting``: e/frame -> counting CPU seconds per frame."""
    figures = cpu_figures(runs)
    gb_s = {path: median(r.gb_s for r in path_runs) for path, path_runs in runs.items()}
    profile: dict[str, dict[str, float]] = {}
    path_rows = []
    for path, path_runs in runs.items():
        best = max(path_runs, key=lambda r: r.gb_s)
        processes = sorted({name for r in path_runs for name in r.cpu_s})
        profile[path] = {name: process_cpu_per_gb(figures[path], name) for name in processes}
        cores = median(sum(r.cpu_s.values()) / r.seconds for r in path_runs if r.seconds > 0)
        path_rows.append([PATHS[path], gb_s[path], median(r.messages_s for r in path_runs),
                          min(r.gb_s for r in path_runs), best.gb_s, ratio(gb_s[path], gb_s["raw"]), cores,
                          path_cpu_per_gb(figures[path]),
                          "yes" if all(r.messages == MESSAGES for r in path_runs) else "NO"])
    comparisons = compare(figures, floor)
    encrypted = hops(figures, floor)
    c_a = ratio(gb_s["pipeline"], gb_s["raw"])
    agg_b = ratio(gb_s["aggregator"], gb_s["proxy"])
    wan_c = ratio(gb_s["pipeline-curve-wan"], gb_s["pipeline"])
    sector_bytes = config.detector.sector_bytes
    # GB/s of payload: a payload of B bytes takes B / (GB/s) nanoseconds.
    message_ns = sector_bytes / gb_s["aggregator"] if gb_s["aggregator"] > 0 else 0.0
    d = config.detector
    frame_bytes = d.frame_rows * d.frame_cols * d.itemsize
    by_service = {(c.service, c.curve): c.cpu for c in comparisons}
    costs = Costs(producer=by_service[("producer", False)], aggregator=by_service[("aggregator", False)],
                  nodegroup=by_service[("NodeGroup, counting off", False)],
                  producer_curve=by_service[("producer", True)], aggregator_curve=by_service[("aggregator", True)],
                  nodegroup_curve=by_service[("NodeGroup, counting off", True)])
    detector_rows = full_detector.rows(costs, counting, frame_bytes)
    same_hop = ratio(profile["pipeline"]["sink"], profile["aggregator"]["sink"])
    notes = [
        f"{MESSAGES:,} two-part messages (header + {sector_bytes:,}-byte payload, zero-copy) per run, {ROUNDS} runs "
        "per path interleaved; every process on tcp 127.0.0.1. CPU-s/GB: a process's user + system CPU seconds "
        "during the transfer over the GB of payload that reached the end of its path, the median of the rounds "
        "(in brackets: service / anchor round by round). The aggregator's plain figure is from the aggregator "
        "path (sender -> aggregator -> C++ sink, as zmq_proxy's); with CURVE both relays decrypt and encrypt "
        "(pipeline-curve against proxy-curve).",
        f"cipher floor (bench/cpp/cipher_floor, libsodium {sodium_version()}, one thread, the cheapest of "
        f"{CIPHER_REPEATS} x {CIPHER_MESSAGES:,} messages of {sector_bytes:,} bytes): crypto_box_easy_afternm "
        f"{floor.seal:.2f} CPU-s/GB ({ratio(1.0, floor.seal):.2f} GB/s per core), crypto_box_open_easy_afternm "
        f"{floor.open:.2f} CPU-s/GB ({ratio(1.0, floor.open):.2f} GB/s per core); '/ (plain + floor)' is the "
        "process with CURVE over the same process plain plus the floor of what it ciphers (senders seal, "
        "receivers open, relays both).",
        f"rates (the paths' table): (c)/(a) = {c_a:.2f}; aggregator/(b) proxy = {agg_b:.2f}; (c) at the real geometry"
        f"/(a) = {ratio(gb_s['pipeline-4'], gb_s['raw']):.2f}; (c) with CURVE on the aggregator -> NodeGroup hop/(c) = "
        f"{wan_c:.2f}, on every hop/(c) = {ratio(gb_s['pipeline-curve'], gb_s['pipeline']):.2f}. Every path here "
        "shares the machine's cores, so a ratio of rates is a ratio of the paths' CPU per GB (cores busy x "
        "seconds / GB) more than of their speed: the targets are on CPU per GB.",
        f"the aggregator's work per message beyond a plain relay's receive and send (decode and check the header, "
        f"pick the NodeGroup; `zmq_hop check`): {peek_ns:.0f} ns, {100 * peek_ns / message_ns:.2f}% of a message's "
        f"{message_ns / 1000:.0f} us at the aggregator's rate" if message_ns > 0 else "no aggregator rate measured",
        f"hwm {config.aggregator.hwm} (aggregator and sinks), producer send_hwm {config.producer.send_hwm}, "
        f"NodeGroup pool {config.nodegroup.pool_frames} frames, {config.nodegroup.counting_threads} assembling "
        "thread(s); (c) uses a detector of one 144 x 576 sector so that it carries the stream of (a) and (b).",
        "the NodeGroup against a C++ sink on its own hop (the sink of the aggregator path, fed by the aggregator "
        f"as the NodeGroup is, so that data arrives at the same pace): {same_hop:.2f}x (rounds "
        f"{', '.join(f'{v:.2f}' for v in cpu_rounds(figures, ('pipeline', 'sink'), ('aggregator', 'sink')))}); the "
        "target's anchor, the raw hop's sink, is fed by a sender with nothing before it and reads bigger bursts.",
        "CPU seconds per GB by process (medians): " + "; ".join(
            f"{path}: " + ", ".join(f"{name} {value:.2f}" for name, value in profile[path].items())
            for path in PATHS),
        *full_detector.notes(frame_bytes),
        "counting cost per frame: bench.counting's counter on one thread (576 x 576 frames, dark reference), "
        + ", ".join(f"{dose:,} e/frame {s * 1e3:.3f} ms" for dose, s in sorted(counting.items()))
        + " (best of its repetitions).",
    ]
    tables = [
        Table("every path: rates, and the CPU per GB of all its processes",
              ["path", "GB/s (median)", "messages/s (median)", "GB/s min", "GB/s max", "/ (a)", "cores busy",
               "CPU-s/GB, all processes", "all arrived"], path_rows),
        Table("encrypted hops: CPU per GB of the path with the hop encrypted vs the path with it plain + the "
              "cipher floor (seal + open)",
              ["hop", "encrypted path", "CPU-s/GB", "plain path", "CPU-s/GB", "floor", "/ (plain + floor)", "goal"],
              [[h.name, h.encrypted, h.cpu, h.plain, h.plain_cpu, h.floor, h.ratio, f"<= {ENCRYPTED_GOAL:.2f}"]
               for h in encrypted]),
        Table("where the relays' and the NodeGroup's CPU goes, thread by thread (CPU-s/GB, medians of the rounds; "
              "python: the Python main thread, zmq_hop: the C++ program's, ZMQbg/IO/n: libzmq's I/O threads, which "
              "do the TCP reads and writes)",
              ["path: process", "thread", "CPU-s/GB", "share of the process"], thread_rows(runs)),
        Table(f"{full_detector.TITLE} ({full_detector.detector_gb_s(frame_bytes):.1f} GB/s), from this run's "
              "CPU per GB and counting cost", full_detector.COLUMNS, detector_rows),
    ]
    return BenchmarkResult(
        columns=["service", "CURVE", "measured as", "CPU-s/GB", "anchor", "anchor CPU-s/GB", "/ anchor (rounds)",
                 "goal", "cipher floor", "/ (plain + floor)", "anchor / (plain + floor)", "GB/s (its path)",
                 "anchor GB/s"],
        rows=comparison_rows(comparisons, gb_s), notes=notes, targets=targets(comparisons, encrypted), tables=tables,
        details={"messages": MESSAGES, "rounds": ROUNDS, "gb_s": gb_s, "ratio_c_a": c_a,
                 "ratio_aggregator_proxy": agg_b, "ratio_wan_curve": wan_c,
                 "rounds_c_a": per_round(runs, "pipeline", "raw"),
                 "rounds_aggregator_proxy": per_round(runs, "aggregator", "proxy"),
                 "peek_ns_per_message": peek_ns, "cpu_s_per_gb": profile,
                 "cipher_floor": dataclasses.asdict(floor), "counting_s_per_frame": counting,
                 "comparisons": [dataclasses.asdict(c) | {"ratio": c.ratio} for c in comparisons],
                 "hops": [dataclasses.asdict(h) | {"ratio": h.ratio} for h in encrypted],
                 "full_detector": full_detector.quoted(detector_rows),
                 "runs": {path: [dataclasses.asdict(r) for r in path_runs] for path, path_runs in runs.items()}},
    )


def sodium_version() -> str:
    """Debian's libsodium version, as the cipher floor program links it (pkg-config), or 'unknown'."""
    try:
        done = subprocess.run(["pkg-config", "--modversion", "libsodium"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


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
