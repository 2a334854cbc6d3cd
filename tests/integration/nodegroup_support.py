"""Helpers of the NodeGroup tests: an aggregator stand-in and the `sectorflow nodegroup` job.

The stand-in plays the aggregator's downstream half (SPEC.md steps 4 and 5) with pyzmq: it reads
the NodeGroups' registrations from the real kvstore, routes frame f to ``routing[f % n]`` over the
sorted UIDs, sends sector r through the NodeGroup's port r, and sends each NodeGroup one info
message per aggregator thread with its expected count, using sectorflow.protocol's codec and
sectorflow.simulator's pixels. It first writes the scan's request record, as `sectorflow acquire`
does: NodeGroups write no file for a scan nobody announced.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
import zmq
from kvstore_support import KvServer
from support import Processes, wait_until

from sectorflow.configs import Config, load_config
from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup.launch import mpiexec_environment
from sectorflow.protocol import (
    SOURCE_SIMULATOR,
    DataHeader,
    InfoMessage,
    NodeGroupRecord,
    ScanRequestRecord,
    encode_header,
    encode_info,
    scan_request_key,
    wall_clock_s,
)
from sectorflow.simulator import simulator_from_config

START_S = 60.0
MPIEXEC = shutil.which("mpiexec") or "mpiexec"


def merged(base: dict, **more: dict) -> dict:
    """``base`` (sections of overrides) with ``more`` on top, section by section; ``base`` is left as it was."""
    out = {key: dict(value) for key, value in base.items()}
    for key, value in more.items():
        out.setdefault(key, {}).update(value)
    return out


@pytest.fixture
def stack(make_config: Callable, processes: Processes) -> Iterator[Callable[..., tuple]]:
    """``stack(**overrides)``: a kvstore server and an aggregator stand-in on a config built from overrides;
    returns (config, path, standin)."""
    made: list[AggregatorStandin] = []

    def make(**overrides: dict) -> tuple:
        config, path = make_config(**overrides)
        KvServer(config, path, processes).start()
        standin = AggregatorStandin(config)
        made.append(standin)
        return config, path, standin

    yield make
    for standin in made:
        standin.close()


def start_job(processes: Processes, config_path: Path, output: Path, *, ranks: int = 2, groups: int = 1,
              name: str = "nodegroups", extra: Iterable[str] = ()) -> subprocess.Popen:
    """``mpiexec -n RANKS sectorflow nodegroup`` in its own process group, as ``sectorflow up`` starts it."""
    return processes.start(
        MPIEXEC, "-n", str(ranks), sys.executable, "-m", "sectorflow", "nodegroup", "--config", str(config_path),
        "--groups-per-rank", str(groups), "--threads", "2", "--output", str(output), *extra, name=name,
        env=dict(mpiexec_environment(load_config(config_path))),
    )


class AggregatorStandin:
    """PUSH sockets to registered NodeGroups, one per (NodeGroup, aggregator thread)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.client = Client.from_config(config, name="aggregator-standin")
        self.context = zmq.Context()
        self.sockets: dict[tuple[str, int], zmq.Socket] = {}
        self.simulator = simulator_from_config(config)

    def close(self) -> None:
        for socket in self.sockets.values():
            socket.close(linger=0)
        self.context.term()
        self.client.close()

    def wait_nodegroups(self, count: int, process: subprocess.Popen | None = None,
                        processes: Processes | None = None) -> list[NodeGroupRecord]:
        """The registrations, sorted by uid, once there are ``count``."""

        def ready() -> list[NodeGroupRecord] | None:
            if process is not None and process.poll() is not None:
                raise AssertionError(f"NodeGroup job exited {process.returncode}: {processes.output(process)}")
            records = self.client.nodegroups()
            return records if len(records) == count else None

        return wait_until(ready, START_S, f"{count} NodeGroups to register")

    def socket(self, record: NodeGroupRecord, thread: int) -> zmq.Socket:
        key = (record.uid, thread)
        if key not in self.sockets:
            push = self.context.socket(zmq.PUSH)
            push.connect(record.endpoint(thread))
            self.sockets[key] = push
        return self.sockets[key]

    def announce(self, scan: int, scan_x: int, scan_y: int, routing: list[str]) -> None:
        """Write ``scans/<scan>/request`` as ``sectorflow acquire`` does, and wait until it is back."""
        record = ScanRequestRecord(scan_number=scan, scan_x=scan_x, scan_y=scan_y, source=SOURCE_SIMULATOR,
                                   routing=routing, producer_threads=[1] * self.config.n_receivers,
                                   requested_s=wall_clock_s()).encode()
        self.client.set_once(scan_request_key(scan), record, self.config.kvstore.scan_record_ttl_s)
        wait_until(lambda: self.client.get(scan_request_key(scan)) == record, START_S, f"scan {scan}'s request")

    def send_scan(self, records: list[NodeGroupRecord], scan: int, scan_x: int, scan_y: int, *,
                  frames: int | None = None, info_first: bool = False, send_info: bool | set[str] = True,
                  only: set[str] | None = None,
                  producer_threads: int = 1, lag_frames: int = 0, announce: bool = True) -> dict:
        """Send a simulated scan routed over ``records``; sectors the simulator drops are not sent.

        ``frames`` stops after that many frames (an upstream that dies); the counts announced are
        those of the whole scan. ``send_info`` may name the uids that get their info messages (the
        others' parts end by timeout), ``only`` the uids that get anything at all (the routing list
        still holds every record's uid: a NodeGroup of another job, or gone). With ``producer_threads`` T, each sector's frames come as a
        receiver server's T producer threads send them (thread t has frames f with f % T == t, in
        order): thread t of sector s runs ``lag_frames * ((s + t) % T)`` frames behind, so frames
        arrive out of order within a sector and sectors of one frame far apart.
        ``announce`` writes the scan's request record first (``sectorflow acquire``'s part).
        Returns ``{uid: [messages per thread]}`` announced.
        """
        n_threads = self.config.n_receivers
        routing = sorted(r.uid for r in records)
        if announce:
            self.announce(scan, scan_x, scan_y, routing)
        by_uid = {r.uid: r for r in records}
        total = scan_x * scan_y
        counts = {uid: [0] * n_threads for uid in routing}
        for frame in range(total):
            for sector in range(n_threads):
                if not self.simulator.dropped(scan, frame, sector):
                    counts[routing[frame % len(routing)]][sector] += 1

        def info() -> None:
            for uid in routing:
                if (only is not None and uid not in only) or (isinstance(send_info, set) and uid not in send_info):
                    continue
                for thread in range(n_threads):
                    message = InfoMessage(scan_number=scan, receiver=thread, thread_id=0, scan_x=scan_x,
                                          scan_y=scan_y, routing=routing, counts={uid: counts[uid][thread]})
                    self.socket(by_uid[uid], thread).send(encode_info(message))

        if send_info and info_first:
            info()

        def sent_at(frame: int, sector: int) -> int:
            return frame + lag_frames * ((sector + frame % producer_threads) % producer_threads)

        order = sorted(((frame, sector) for frame in range(total if frames is None else frames)
                        for sector in range(n_threads)), key=lambda fs: (sent_at(*fs), fs[1]))
        for frame, sector in order:
            if self.simulator.dropped(scan, frame, sector):
                continue
            if only is not None and routing[frame % len(routing)] not in only:
                continue
            header = DataHeader(scan_number=scan, frame_number=frame, sector=sector, scan_x=scan_x,
                                scan_y=scan_y, position_x=frame % scan_x, position_y=frame // scan_x)
            payload = self.simulator.sector(scan, frame, sector)
            self.socket(by_uid[routing[frame % len(routing)]], sector).send_multipart([encode_header(header), payload])
        if send_info and not info_first:
            info()
        return counts
