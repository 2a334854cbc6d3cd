"""Helpers of the aggregator tests: a pipeline of real processes (kvstore, aggregator, NodeGroup
stand-ins) and the producers, played by pyzmq PUSH sockets in the test that speak SPEC.md with the
protocol codec. Sectors carry bytes derived from (scan, frame, sector) so a digest proves that the
payload arrived unchanged."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import zmq
from support import STANDIN, Processes, read_jsonl, wait_until

from sectorflow.configs import Config
from sectorflow.kvstore import Client
from sectorflow.protocol import ServiceStatus, status_key
from sectorflow.protocol import DataHeader, InfoMessage, encode_header, encode_info

START_S = 20.0
# Four sectors of 8 x 32 pixels; receiver 0 has two producer threads, the others one.
SMALL = {
    "detector": {"frame_rows": 32, "frame_cols": 32, "sector_rows": 8, "sector_cols": 32, "dtype": "uint16"},
    "receivers": [{"host": "127.0.0.1", "threads": 2}] + [{"host": "127.0.0.1", "threads": 1}] * 3,
}


def payload(config: Config, scan: int, frame: int, sector: int) -> bytes:
    """The sector's bytes: deterministic, different for every (scan, frame, sector)."""
    seed = f"{scan}/{frame}/{sector}".encode()
    size = config.detector.sector_bytes
    return (hashlib.blake2b(seed).digest() * (size // 64 + 1))[:size]


def data_message(config: Config, scan: int, scan_x: int, scan_y: int, frame: int, sector: int,
                 thread: int) -> list[bytes]:
    """The two frames of one data message (SPEC.md, "Data message")."""
    header = DataHeader(scan_number=scan, frame_number=frame, sector=sector, scan_x=scan_x, scan_y=scan_y,
                        position_x=frame % scan_x, position_y=frame // scan_x, thread_id=thread)
    return [encode_header(header), payload(config, scan, frame, sector)]


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def route(routing: list[str], frame: int) -> str:
    return routing[frame % len(routing)]


@dataclass
class Standin:
    uid: str
    out: Path
    process: subprocess.Popen

    def data(self, scan: int | None = None) -> list[dict]:
        return [l for l in read_jsonl(self.out) if l["kind"] == "data" and (scan is None or l["header"][1] == scan)]

    def infos(self, scan: int) -> list[dict]:
        return [l for l in read_jsonl(self.out) if l["kind"] == "info" and l["info"]["scan_number"] == scan]


@dataclass
class Pipeline:
    """kvstore + aggregator processes, stand-ins on demand, producer sockets and a kvstore client."""

    config: Config
    path: Path
    processes: Processes
    tmp_path: Path
    client: Client
    aggregator: subprocess.Popen | None = None
    standins: dict[str, Standin] = field(default_factory=dict)
    context: zmq.Context = field(default_factory=zmq.Context)
    pushes: dict[tuple[int, int], zmq.Socket] = field(default_factory=dict)

    def start_standin(self, uid: str, *flags: str) -> Standin:
        """A stand-in NodeGroup, registered; ``flags`` such as ``--never-read`` go to its command line."""
        out = self.tmp_path / f"standin-{uid}.jsonl"
        process = self.processes.start(sys.executable, str(STANDIN), "--config", str(self.path), "--uid", uid,
                                       "--out", str(out), *flags, name=f"standin-{uid}")
        standin = Standin(uid, out, process)
        self.standins[uid] = standin
        wait_until(lambda: self.client.get(f"nodegroups/{uid}"), START_S, f"stand-in {uid} to register")
        return standin

    def stop_standin(self, uid: str) -> None:
        standin = self.standins.pop(uid)
        assert self.processes.stop(standin.process) == 0
        wait_until(lambda: self.client.get(f"nodegroups/{uid}") is None, START_S, f"stand-in {uid} to leave")

    def push(self, receiver: int, thread: int) -> zmq.Socket:
        """Producer thread (receiver, thread)'s PUSH socket to aggregator thread `receiver`."""
        key = (receiver, thread)
        if key not in self.pushes:
            socket = self.context.socket(zmq.PUSH)
            socket.setsockopt(zmq.LINGER, 2000)
            socket.connect(f"tcp://{self.config.aggregator.host}:{self.config.aggregator.base_port + receiver}")
            self.pushes[key] = socket
        return self.pushes[key]

    def frames_of(self, scan_x: int, scan_y: int, receiver: int, thread: int) -> list[int]:
        """The frames producer thread (receiver, thread) sends: every T_r-th."""
        threads = self.config.receivers[receiver].threads
        return [f for f in range(scan_x * scan_y) if f % threads == thread]

    def send_info(self, scan: int, scan_x: int, scan_y: int, routing: list[str]) -> None:
        """Every producer thread's info message for the scan (SPEC.md step 2)."""
        for r, receiver in enumerate(self.config.receivers):
            for t in range(receiver.threads):
                counts = Counter(route(routing, f) for f in self.frames_of(scan_x, scan_y, r, t))
                info = InfoMessage(scan_number=scan, receiver=r, thread_id=t, scan_x=scan_x, scan_y=scan_y,
                                   routing=routing, counts={uid: counts.get(uid, 0) for uid in routing})
                self.push(r, t).send(encode_info(info))

    def send_data(self, scan: int, scan_x: int, scan_y: int, frames: list[int] | None = None) -> None:
        """Every sector of `frames` (default: all) from the producer thread that owns it."""
        for r, receiver in enumerate(self.config.receivers):
            for t in range(receiver.threads):
                for f in self.frames_of(scan_x, scan_y, r, t):
                    if frames is not None and f not in frames:
                        continue
                    self.push(r, t).send_multipart(data_message(self.config, scan, scan_x, scan_y, f, r, t))

    def statuses(self) -> dict[int, ServiceStatus]:
        out = {}
        for r in range(self.config.n_receivers):
            raw = self.client.get(status_key("aggregator", f"t{r}"))
            if raw is not None:
                out[r] = ServiceStatus.decode(raw)
        return out

    def close(self) -> None:
        for socket in self.pushes.values():
            socket.close(linger=0)
        self.context.term()
