"""A hostile peer against a running stack (kvstore, aggregator, two NodeGroup ranks under mpiexec,
four producer daemons): every class of bad input a data port can be sent, built by hand as an
attacker would (raw pyzmq, raw msgpack, not the project's codec), is refused and counted by kind
where an operator sees it; no process ends; and a normal scan afterwards has every frame. So is a
poisoned registration in the kvstore and a request for a scan too large to hold.

The aggregator thread and the NodeGroup port of sector 0 get the same messages: the aggregator
refuses what a NodeGroup would (protocol/SPEC.md, "Refusals"), so a bad message never crosses the
WAN. The aggregator also gets the infos that once made it use a freed scan entry: 16 scans open and
an info for a 17th with a lower number.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest
import zmq
from support import sectorflow_command, stack_up, wait_until

from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client
from sectorflow.protocol import ACQUIRE_REQUEST_KEY, AcquireRequest, ServiceStatus, status_key
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration import load_running
from sectorflow.protocol import REFUSAL_KINDS, max_frame_bytes

pytestmark = pytest.mark.mpi

SMALL = {"frame_rows": 32, "frame_cols": 32, "sector_rows": 8, "sector_cols": 32, "dtype": "uint16"}
MAX_POSITIONS = 4096
START_S = 60.0
COUNTED_S = 30.0


def sectorflow(*args: str, timeout_s: float = 180) -> subprocess.CompletedProcess:
    return sectorflow_command(*args, timeout_s=timeout_s)


def header(sector: int, scan: int = 9, frame: int = 0, scan_x: int = 4, scan_y: int = 4, x: int = 0, y: int = 0,
           version: int = 2) -> bytes:
    """A data header as the wire spells it: [version, scan, frame, sector, scan_x, scan_y, x, y, thread]."""
    return msgpack.packb([version, scan, frame, sector, scan_x, scan_y, x, y, 0])


def info(scan: int, receiver: int, routing: list[str]) -> bytes:
    return msgpack.packb({"version": 1, "kind": "info", "scan_number": scan, "receiver": receiver, "thread_id": 0,
                          "scan_x": 4, "scan_y": 4, "routing": routing, "counts": {uid: 1 for uid in routing}})


def data_attacks(config: Config, sector: int) -> list[tuple[str, list[bytes]]]:
    """(refusal kind, frames) of every class of bad message a data port can be sent."""
    payload = bytes(config.detector.sector_bytes)
    other = (sector + 1) % config.n_receivers
    return [
        ("parts", [b"a", b"b", b"c"]),
        ("header", [b"\xc1", payload]),
        ("header", [b"\xdd\xff\xff\xff\xff", payload]),  # declares an array of 2^32 - 1 elements
        ("header", [msgpack.packb([1, 9, 0]), payload]),
        ("header", [header(sector, version=1), payload]),  # SFSP 1: the frame number was the position
        ("header", [header(sector) + b"\x00", payload]),
        ("shape", [header(sector, scan_x=2**32 - 1, scan_y=2**32 - 1), payload]),  # once aborted a NodeGroup
        ("shape", [header(sector, scan_x=100, scan_y=100), payload]),  # more positions than allowed
        ("position", [header(sector, y=4), payload]),
        ("position", [header(sector, x=4), payload]),
        ("sector", [header(other), payload]),
        ("payload", [header(sector), payload[:-2]]),
        ("info", [b"\x81\xa4kind\xa4info"]),
        ("info", [b"\xdf\xff\xff\xff\xff"]),  # declares a map of 2^32 - 1 pairs
        ("info", [info(9, other, ["ng-ghost"])]),  # another receiver's info on this port
    ]


def send_all(endpoint: str, messages: list[list[bytes]]) -> None:
    with zmq.Context() as context, context.socket(zmq.PUSH) as push:
        push.setsockopt(zmq.LINGER, 5000)
        push.connect(endpoint)
        for frames in messages:
            push.send_multipart(frames)


@dataclass
class Stack:
    config: Config
    path: Path
    run_dir: Path
    output: Path
    client: Client

    def status(self, service: str, name: str) -> ServiceStatus | None:
        raw = self.client.get(status_key(service, name))
        return ServiceStatus.decode(raw) if raw is not None else None

    def refused(self, service: str, name: str) -> dict[str, int] | None:
        status = self.status(service, name)
        if status is None:
            return None
        return {kind: status.extra[f"malformed_{kind}"] for kind in REFUSAL_KINDS if status.extra[f"malformed_{kind}"]}


@pytest.fixture
def stack(make_config, tmp_path: Path) -> Iterator[Stack]:
    config, path = make_config(detector=SMALL, limits={"max_scan_positions": MAX_POSITIONS},
                               nodegroup={"pool_frames": 32})
    run_dir, output = tmp_path / "run", tmp_path / "h5"
    with stack_up(config, path, run_dir, output, START_S) as client:
        yield Stack(config, path, run_dir, output, client)


def test_every_bad_message_is_refused_and_counted_and_a_scan_still_has_every_frame(stack: Stack) -> None:
    config = stack.config
    attacks = data_attacks(config, sector=0)
    expected = dict(Counter(kind for kind, _ in attacks))
    aggregator_port = f"tcp://{config.aggregator.host}:{config.aggregator.base_port}"
    nodegroup = stack.client.nodegroups()[0]

    send_all(aggregator_port, [*[frames for _, frames in attacks], [header(0, scan=7777), bytes(512)]])
    send_all(nodegroup.endpoint(0), [frames for _, frames in attacks])
    # A frame larger than ZMQ_MAXMSGSIZE (a sector or an info message), on a connection of its own:
    # ZeroMQ cuts the peer off before the message exists, so it is never decoded nor counted.
    oversized = bytes(max_frame_bytes(config.geometry()) + 1)
    for endpoint in (aggregator_port, nodegroup.endpoint(0)):
        send_all(endpoint, [[header(0), oversized]])
    # Sixteen scans open on aggregator thread 0, then a 17th with a lower number: the table makes room
    # by closing the scan opened first, not the one being opened.
    send_all(aggregator_port, [[info(scan, 0, ["ng-ghost"])] for scan in [*range(100, 116), 50]])

    aggregator_expected = expected | {"no_info": 1}
    wait_until(lambda: stack.refused("aggregator", "t0") == aggregator_expected, COUNTED_S,
               f"aggregator thread 0 to count {aggregator_expected}")
    wait_until(lambda: stack.refused("nodegroup", nodegroup.uid) == expected, COUNTED_S,
               f"NodeGroup {nodegroup.uid} to count {expected}")
    wait_until(lambda: stack.status("aggregator", "t0").extra["evicted_scans"] == 1, COUNTED_S,
               "aggregator thread 0 to close one scan to open the 17th")

    # A registration that is valid msgpack but not a record: every reader skips it and reports it once.
    stack.client.set_once("nodegroups/evil", msgpack.packb({"uid": "evil", "ports": "all of them"}))
    wait_until(lambda: stack.status("aggregator", "t0").extra.get("bad_records") == 1, COUNTED_S,
               "the aggregator to report the bad registration")

    # A request for a scan too large to hold: every producer refuses it and says so in its status.
    stack.client.set_once(ACQUIRE_REQUEST_KEY, AcquireRequest(scan_number=2, scan_x=65535, scan_y=65535).encode())
    for r in range(config.n_receivers):
        wait_until(lambda: (s := stack.status("producer", f"r{r}t0")) and s.state == "error" and s.scan == 2
                   and "more than the 4096 positions allowed" in str(s.extra), COUNTED_S,
                   f"producer r{r} to refuse the request of scan 2")

    acquired = sectorflow("acquire", "--config", str(stack.path), "--scan-number", "1", "--scan-shape", "8x8",
                          "--wait", "--timeout", "120")
    assert acquired.returncode == 0, acquired.stderr
    wait_until(lambda: (stack.output / scan_file_name(1)).exists(), COUNTED_S, "scan 1's file")
    counted = read_counted_scan(stack.output / scan_file_name(1))
    assert counted.scan_shape == (8, 8)
    assert len(counted.missing_positions) == 0 and len(counted.incomplete_positions) == 0

    # The counts did not move with the good scan; nobody else refused anything; every service lives.
    assert stack.refused("aggregator", "t0") == aggregator_expected
    assert stack.refused("nodegroup", nodegroup.uid) == expected
    assert all(stack.refused("aggregator", f"t{r}") == {} for r in range(1, config.n_receivers))
    other = stack.client.nodegroups()[1]
    assert stack.refused("nodegroup", other.uid) == {}
    assert all(Path(f"/proc/{service.pid}").exists() for service in load_running(stack.run_dir))
    aggregator_log = (stack.run_dir / "aggregator.log").read_text()
    assert aggregator_log.count("skipped the registration nodegroups/evil") == 1

    status = sectorflow("status", "--config", str(stack.path))
    assert status.returncode == 0, status.stderr
    row = next(line for line in status.stdout.splitlines() if line.startswith("aggregator") and " t0 " in line)
    assert f" {sum(aggregator_expected.values())} (header 5, info 3, no_info 1, parts 1, payload 1, position 2," in row
