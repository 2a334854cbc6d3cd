"""Transport: the same stream of sector-sized two-part messages through three paths, in one run.

(a) raw: sender PUSH -> sink PULL, one hop;
(b) proxy: sender -> ``zmq.proxy(PULL, PUSH)`` in its own process -> sink (a bare libzmq relay);
(c) aggregator: sender -> our ``Aggregator`` (one relay thread) in its own process -> sink, which
    is registered in a kvstore as the only NodeGroup, so the relay finds it by service discovery.

Every path carries one info message (SPEC.md step 2) and then ``MESSAGES`` data messages of a
msgpack header and a 165,888-byte payload (one 144 x 576 uint16 sector). The sink times from its
first data message to its last. The three paths run interleaved, ``ROUNDS`` times each, each run
bounded in messages and in time; the table gives the medians and the ratios (c)/(b), (c)/(a).
Sender, relay and sink are separate processes: on a two-core machine the cores, not the relay
code, bound any three-process path.
"""

from __future__ import annotations

import multiprocessing as mp
import socket
import statistics
import threading
import time
from typing import Any

from bench import BenchmarkResult
from sectorflow.configs import Config

DESCRIPTION = "relay of sector-sized messages: raw PUSH->PULL vs zmq.proxy vs the aggregator, GB/s"

MESSAGES = 12_000       # data messages per run (about 2 GB)
ROUNDS = 3              # runs of each path, interleaved a, b, c, a, b, c, ...
RUN_TIMEOUT_S = 30.0    # a run that has not finished by then reports what arrived
SINK_UID = "bench-sink"
PATHS = ("raw", "proxy", "aggregator")


def _free_ports(host: str, count: int) -> int:
    """The first of ``count`` consecutive ports on ``host`` that were free a moment ago."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind((host, 0))
            base = probe.getsockname()[1]
        if base + count > 65535:
            continue
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports on {host}")


def _sender(endpoint: str, messages: int, sector_bytes: int, hwm: int) -> None:
    import zmq

    from sectorflow.protocol import DataHeader, InfoMessage, encode_header, encode_info

    scan_x = 100
    scan_y = (messages + scan_x - 1) // scan_x
    headers = [encode_header(DataHeader(scan_number=1, frame_number=f, sector=0, scan_x=scan_x, scan_y=scan_y,
                                        position_x=f % scan_x, position_y=f // scan_x)) for f in range(messages)]
    payload = bytes(range(256)) * (sector_bytes // 256) + bytes(sector_bytes % 256)
    with zmq.Context() as context, context.socket(zmq.PUSH) as push:
        push.setsockopt(zmq.SNDHWM, hwm)
        push.setsockopt(zmq.LINGER, int(RUN_TIMEOUT_S * 1000))
        push.connect(endpoint)
        push.send(encode_info(InfoMessage(scan_number=1, receiver=0, thread_id=0, scan_x=scan_x, scan_y=scan_y,
                                          routing=[SINK_UID], counts={SINK_UID: messages})))
        # The payload is never modified, so ZeroMQ may keep referring to it (copy=False).
        for header in headers:
            push.send(header, zmq.SNDMORE)
            push.send(payload, copy=False)


def _sink(host: str, messages: int, hwm: int, ports: Any, results: Any) -> None:
    import zmq

    with zmq.Context() as context, context.socket(zmq.PULL) as pull:
        pull.setsockopt(zmq.RCVHWM, hwm)
        pull.bind(f"tcp://{host}:0")
        ports.put(int(pull.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1]))
        received = size = 0
        first = last = 0.0
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while received < messages and time.monotonic() < deadline:
            if not pull.poll(100):
                continue
            parts = pull.recv_multipart(copy=False)
            if len(parts) != 2:
                continue  # the info message
            last = time.perf_counter()
            if received == 0:
                first = last
            received += 1
            size += len(parts[0].buffer) + len(parts[1].buffer)
        results.put((received, size, last - first))


def _proxy(host: str, sink_endpoint: str, hwm: int, ports: Any) -> None:
    import zmq

    context = zmq.Context()
    front = context.socket(zmq.PULL)
    back = context.socket(zmq.PUSH)
    for s in (front, back):
        s.setsockopt(zmq.SNDHWM, hwm)
        s.setsockopt(zmq.RCVHWM, hwm)
    back.connect(sink_endpoint)
    front.bind(f"tcp://{host}:0")
    ports.put(int(front.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1]))
    zmq.proxy(front, back)  # until the process is terminated


def _aggregator(config_path: str, kv_port: int, base_port: int, ports: Any) -> None:
    from sectorflow.aggregator import Aggregator, AggregatorOptions
    from sectorflow.configs import load_config
    from sectorflow.kvstore import NODEGROUPS_PREFIX, ClientOptions

    config = load_config(config_path or None)
    kv = config.kvstore
    options = AggregatorOptions(
        bind_host=config.aggregator.bind_host, base_port=base_port, producer_threads=[1],
        kvstore=ClientOptions(host=kv.host, port=kv_port, subtree=NODEGROUPS_PREFIX, heartbeat_ms=kv.heartbeat_ms,
                              silence_heartbeats=kv.silence_heartbeats),
        hwm=config.aggregator.hwm, discovery_wait_ms=kv.silence_heartbeats * kv.heartbeat_ms)
    aggregator = Aggregator(options)
    aggregator.start()
    ports.put(base_port)
    threading.Event().wait()  # until the process is terminated


def _run(path: str, config: Config, kv_port: int | None, mp_context: Any) -> tuple[int, int, float]:
    """One run of one path; returns (data messages, bytes, seconds) as the sink saw them."""
    host = config.aggregator.bind_host
    hwm = config.aggregator.hwm
    ports, results = mp_context.Queue(), mp_context.Queue()
    sink = mp_context.Process(target=_sink, args=(host, MESSAGES, hwm, ports, results))
    sink.start()
    sink_port = ports.get(timeout=RUN_TIMEOUT_S)
    relay = None
    client = None
    try:
        if path == "raw":
            entry = sink_port
        elif path == "proxy":
            relay = mp_context.Process(target=_proxy, args=(host, f"tcp://{host}:{sink_port}", hwm, ports))
            relay.start()
            entry = ports.get(timeout=RUN_TIMEOUT_S)
        else:
            from sectorflow.kvstore import Client, ClientOptions, NodeGroupRecord, nodegroup_key

            kv = config.kvstore
            client = Client(ClientOptions(host=kv.host, port=kv_port, heartbeat_ms=kv.heartbeat_ms,
                                          silence_heartbeats=kv.silence_heartbeats))
            client.set(nodegroup_key(SINK_UID), NodeGroupRecord(uid=SINK_UID, host=host, ports=[sink_port]).encode())
            relay = mp_context.Process(target=_aggregator,
                                       args=(config.source if config.source != "<defaults>" else "", kv_port,
                                             _free_ports(host, 1), ports))
            relay.start()
            entry = ports.get(timeout=RUN_TIMEOUT_S)
        sender = mp_context.Process(target=_sender,
                                    args=(f"tcp://{host}:{entry}", MESSAGES, config.detector.sector_bytes, hwm))
        sender.start()
        received = results.get(timeout=RUN_TIMEOUT_S + 10)
        sender.join(RUN_TIMEOUT_S)
        if sender.is_alive():
            sender.terminate()
        return received
    finally:
        for process in (relay, sink):
            if process is not None and process.is_alive():
                process.terminate()
            if process is not None:
                process.join(10)
        if client is not None:
            client.close()


def run(config: Config) -> BenchmarkResult:
    from sectorflow.kvstore import Server, ServerOptions

    mp_context = mp.get_context("spawn")
    kv_port = _free_ports(config.kvstore.bind_host, 3)
    server = Server(ServerOptions(bind_host=config.kvstore.bind_host, port=kv_port,
                                  heartbeat_ms=config.kvstore.heartbeat_ms))
    serving = threading.Thread(target=server.run, name="bench-kvstore")
    serving.start()
    runs: dict[str, list[tuple[int, int, float]]] = {path: [] for path in PATHS}
    try:
        for _ in range(ROUNDS):
            for path in PATHS:
                runs[path].append(_run(path, config, kv_port, mp_context))
    finally:
        server.stop()
        serving.join()

    rows = []
    medians: dict[str, tuple[float, float]] = {}
    for path in PATHS:
        gbps = [size / seconds / 1e9 for n, size, seconds in runs[path] if seconds > 0]
        rates = [n / seconds for n, size, seconds in runs[path] if seconds > 0]
        complete = all(n == MESSAGES for n, _, _ in runs[path])
        medians[path] = (statistics.median(gbps) if gbps else 0.0, statistics.median(rates) if rates else 0.0)
        rows.append([path, medians[path][0], medians[path][1], min(gbps, default=0.0), max(gbps, default=0.0),
                     "yes" if complete else "NO"])
    ratio_b = medians["aggregator"][0] / medians["proxy"][0] if medians["proxy"][0] else 0.0
    ratio_a = medians["aggregator"][0] / medians["raw"][0] if medians["raw"][0] else 0.0
    notes = [
        f"{MESSAGES} two-part messages of {config.detector.sector_bytes:,} payload bytes per run, "
        f"{ROUNDS} runs per path interleaved; medians; sender, relay and sink each a process on tcp loopback.",
        f"aggregator / proxy = {ratio_b:.2f}; aggregator / raw = {ratio_a:.2f}",
        f"hwm {config.aggregator.hwm} on every socket; cores: {mp.cpu_count()}",
    ]
    return BenchmarkResult(
        columns=["path", "GB/s (median)", "messages/s (median)", "GB/s min", "GB/s max", "all arrived"],
        rows=rows, notes=notes,
        details={"runs": runs, "ratio_aggregator_proxy": ratio_b, "ratio_aggregator_raw": ratio_a},
    )
