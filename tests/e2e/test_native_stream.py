"""The detector's own stream into a running stack: a sender that speaks the 4D Camera receivers'
native header (tests/native_sender.py, written from the field list, not through sectorflow's codec)
streams scans into the aggregator of `sectorflow up`, and the NodeGroups' HDF5 file equals stempy's
counting of the same frames, each at the position its header gave, with a frame counter that
neither starts at 0 nor follows the positions."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import pytest
import stempy.image as stim
import zmq
from native_sender import NativeScan, native_header, stream_native
from support import sectorflow_command, stack_up, wait_until

from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client, client_options
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.protocol import REFUSAL_KINDS, SOURCE_NATIVE, ServiceStatus, scan_prefix, status_key
from sectorflow.operations.scan_account import COMPLETE, FAILED, INCOMPLETE, account, records_of
from sectorflow.simulator import simulator_from_config

pytestmark = pytest.mark.mpi

SMALL_DETECTOR = {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}
BACKGROUND, XRAY = 30.0, 1000.0
THREADS = 2
START_S, FILE_S = 60.0, 60.0


def sectorflow(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return sectorflow_command(*args, timeout_s=timeout_s)


@dataclass
class Stack:
    config: Config
    output: Path
    client: Client

    def endpoints(self) -> list[str]:
        agg = self.config.aggregator
        return [f"tcp://{agg.host}:{agg.base_port + r}" for r in range(self.config.n_receivers)]

    def status(self, service: str, name: str) -> ServiceStatus | None:
        raw = self.client.get(status_key(service, name))
        return ServiceStatus.decode(raw) if raw is not None else None

    def refused(self, name: str) -> dict[str, int]:
        extra = self.status("aggregator", name).extra
        return {kind: extra[f"malformed_{kind}"] for kind in REFUSAL_KINDS if extra[f"malformed_{kind}"]}

    def account(self, scan: int):
        return account(records_of(self.client.subtree(scan_prefix(scan)), scan))


def native_stack(make_config, tmp_path: Path, wires: list[str], simulator: dict | None = None,
                 requested: bool = True, nodegroups: bool = True) -> Iterator[Stack]:
    """``requested``: scans come through ``sectorflow acquire``; False: the sender starts them itself,
    as a receiver's own software does (``[aggregator] native_scans_requested = false``). ``nodegroups``:
    False starts no NodeGroup job."""
    config, path = make_config(
        detector=SMALL_DETECTOR, receivers=[{"host": "127.0.0.1", "threads": THREADS, "wire": w} for w in wires],
        simulator={"bright_field_radius_px": 20.0, **(simulator or {})},
        aggregator={"native_scan_idle_s": 2.0, "native_scans_requested": requested},
        counting={"background_threshold": BACKGROUND, "xray_threshold": XRAY}, nodegroup={"pool_frames": 64})
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output, START_S, nodegroups) as client:
        yield Stack(config, output, client)


@pytest.fixture
def native(make_config, tmp_path: Path) -> Iterator[Stack]:
    # The detector's own software streams: no acquire asks for its scans.
    yield from native_stack(make_config, tmp_path, ["native"] * 4, requested=False)


def assert_equals_stempy(stack: Stack, scan: NativeScan, lost: dict[int, list[int]] | None = None) -> None:
    """The file of ``scan`` holds stempy's counting of every frame at the position its header gave;
    the sectors in ``lost`` (position -> modules) were never sent and are zero in the reference."""
    lost = lost or {}
    counted = read_counted_scan(stack.output / scan_file_name(scan.scan))
    assert counted.scan_shape == (scan.scan_y, scan.scan_x)
    assert counted.missing_positions.tolist() == []
    assert counted.incomplete_positions.tolist() == sorted(p for p, m in lost.items() if m)
    simulator = simulator_from_config(stack.config)
    rows = stack.config.detector.sector_rows
    for position in range(scan.scan_x * scan.scan_y):
        frame = simulator.frame(scan.scan, position)
        for module in lost.get(position, []):
            frame[module * rows:(module + 1) * rows] = 0
        expected = stim.electron_count_frame(frame, darkreference=np.zeros(frame.shape, np.float32),
                                             background_threshold=BACKGROUND, xray_threshold=XRAY).data[0, 0]
        np.testing.assert_array_equal(counted.events[position], expected, err_msg=f"position {position}")


def test_a_native_stream_with_an_offset_shuffled_frame_counter_is_counted_like_stempy(native: Stack) -> None:
    simulator = simulator_from_config(native.config)
    scan = NativeScan.shuffled(scan=21, scan_x=9, scan_y=7, first_frame=1_000_003, seed=5)
    sent = stream_native(native.endpoints(), scan, THREADS, lambda p: simulator.frame(scan.scan, p),
                         native.config.detector.sector_rows)
    assert sent == 9 * 7 * 4
    wait_until(lambda: (native.output / scan_file_name(scan.scan)).exists(), FILE_S, "the native scan's file")
    assert_equals_stempy(native, scan)

    # The aggregator fixed the routing itself and recorded it; the account closes on the file.
    scan_account = wait_until(lambda: (a := native.account(scan.scan)).outcome == COMPLETE and a, FILE_S,
                              "the native scan's account to be complete")
    assert (scan_account.counted, scan_account.spilled, scan_account.missing) == (sent, 0, 0)
    request = records_of(native.client.subtree(scan_prefix(scan.scan)), scan.scan).request
    assert request.source == SOURCE_NATIVE
    assert request.routing == sorted(g.uid for g in native.client.nodegroups())
    for r in range(4):
        status = native.status("aggregator", f"t{r}")
        assert status.extra["native_scans"] == 1 and status.extra["lost"] == 0
        assert native.refused(f"t{r}") == {}


def test_a_native_thread_that_sends_less_than_it_announced_is_closed_after_the_idle_time(native: Stack) -> None:
    # Thread 1 of module 2 announces its frames but its last three never come: relay thread 2 closes
    # the scan after native_scan_idle_s, the NodeGroups write what came, and the account says where
    # the three are.
    simulator = simulator_from_config(native.config)
    scan = NativeScan.shuffled(scan=23, scan_x=6, scan_y=5, first_frame=77, seed=6)
    short = set(scan.thread_frames(1, THREADS)[-3:])
    sent = stream_native(native.endpoints(), scan, THREADS, lambda p: simulator.frame(scan.scan, p),
                         native.config.detector.sector_rows, skip=lambda k, m: m == 2 and k in short,
                         announce_skipped=True)
    assert sent == 6 * 5 * 4 - 3
    wait_until(lambda: (native.output / scan_file_name(scan.scan)).exists(), FILE_S, "the short scan's file")
    assert_equals_stempy(native, scan, lost={scan.order[k]: [2] for k in short})
    scan_account = wait_until(lambda: (a := native.account(scan.scan)).outcome == INCOMPLETE and a, FILE_S,
                              "the short scan's account")
    assert (scan_account.counted, scan_account.spilled, scan_account.missing) == (sent, 0, 3)
    assert scan_account.receivers[2].reasons == ["3 never reached the aggregator from the native receiver"]


@pytest.mark.parametrize("after_idle", [False, True], ids=["at-once", "after-native-scan-idle"])
def test_a_stray_native_run_before_a_scan_never_lowers_what_the_real_run_counts(native: Stack,
                                                                               after_idle: bool) -> None:
    # With native_scans_requested = false the first message of a scan opens it, whatever
    # sent it. One stray header announcing one message opens a run of scan 7 at relay thread 0; the
    # receivers' real scan 7 follows, while that run is open or after it closed. Each is a run of its
    # own (the relay tags what it forwards with its run), the NodeGroups count each apart, and the
    # real run's 1024 sectors are all counted.
    simulator = simulator_from_config(native.config)
    scan = NativeScan(7, 16, 16, 0, list(range(256)))
    with zmq.Context() as context, context.socket(zmq.PUSH) as push:
        push.setsockopt(zmq.LINGER, 5000)
        push.connect(native.endpoints()[0])
        push.send_multipart([native_header(7, 0, 1, 16, 16, 0, 0, 0, 0), bytes(native.config.detector.sector_bytes)])
    wait_until(lambda: native.status("aggregator", "t0").extra["native_scans"] == 1, START_S,
               "relay thread 0 to open the stray's run")
    if after_idle:  # the stray's run closes after native_scan_idle_s (its thread 1 never came)
        wait_until(lambda: native.status("aggregator", "t0").extra["open_scans"] == 0, START_S,
                   "the stray's run to close")
    sent = stream_native(native.endpoints(), scan, THREADS, lambda p: simulator.frame(scan.scan, p),
                         native.config.detector.sector_rows)
    assert sent == 1024
    wait_until(lambda: (native.output / scan_file_name(scan.scan)).exists(), FILE_S, "scan 7's file")
    # The stray's sector came first for frame 0, sector 0: the slot keeps it (zeros), and the real
    # run's sector for it is a duplicate. Every other sector is the real run's.
    counted = read_counted_scan(native.output / scan_file_name(scan.scan))
    assert counted.missing_positions.tolist() == [] and counted.incomplete_positions.tolist() == []
    rows = native.config.detector.sector_rows
    for position in range(256):
        frame = simulator.frame(scan.scan, position)
        if position == 0:
            frame[:rows] = 0
        expected = stim.electron_count_frame(frame, darkreference=np.zeros(frame.shape, np.float32),
                                             background_threshold=BACKGROUND, xray_threshold=XRAY).data[0, 0]
        np.testing.assert_array_equal(counted.events[position], expected, err_msg=f"position {position}")
    for group in native.client.nodegroups():
        extra = native.status("nodegroup", group.uid).extra
        assert (extra["malformed"], extra["late_messages"]) == (0, 0), extra
    assert native.status("aggregator", "t0").extra["native_scans"] == 2
    # The account and the file name both runs of port 0 at each NodeGroup, and which one the relay
    # recorded. The stray's run holds its sector (and, while it was open, the real receiver's first
    # ones); with the real run's, port 0 heard the receiver's 256 sectors and the stray's one.
    groups = native.client.nodegroups()
    scan_account = wait_until(lambda: (a := native.account(scan.scan)).outcome == COMPLETE and a, FILE_S,
                              "scan 7's account")
    assert (scan_account.counted, scan_account.missing) == (1024, 0)
    received = []
    for group in groups:
        notes = [note for note in scan_account.notes if note.startswith(f"NodeGroup {group.uid}, port ")]
        assert len(notes) == 1, scan_account.notes
        match = re.fullmatch(rf"NodeGroup {group.uid}, port 0: 2 runs of this scan, each counted apart: "
                             r"run [0-9a-f]{8}: (\d+) received of \1; run [0-9a-f]{8} \(the relay's\): "
                             r"(\d+) received of \2", notes[0])
        assert match is not None, notes[0]
        received.append((int(match[1]), int(match[2])))
    assert sum(stray for stray, _ in received) >= 1 and sum(map(sum, received)) == 257, received
    with h5py.File(native.output / scan_file_name(scan.scan), "r") as f:
        ports = {uid: [row[0] for row in group.attrs["runs"].tolist()] for uid, group in f["metadata/nodegroups"].items()}
    assert ports == {group.uid: [0, 0, 1, 2, 3] for group in groups}



def test_a_native_stream_with_no_nodegroup_registered_is_dropped_and_accounted_as_not_streamed(
        make_config, tmp_path: Path) -> None:
    # The detector's software starts a scan while no NodeGroup job runs: the aggregator fixes an
    # empty routing, drops what comes and counts it lost; the account says so for every sector.
    for stack in native_stack(make_config, tmp_path, ["native"] * 4, requested=False, nodegroups=False):
        simulator = simulator_from_config(stack.config)
        scan = NativeScan.shuffled(scan=25, scan_x=6, scan_y=4, first_frame=500, seed=7)
        sent = stream_native(stack.endpoints(), scan, THREADS, lambda p: simulator.frame(scan.scan, p),
                             stack.config.detector.sector_rows)
        assert sent == 6 * 4 * 4
        wait_until(lambda: sum(stack.status("aggregator", f"t{r}").extra["lost"] for r in range(4)) == sent, FILE_S,
                   "every sector dropped at the aggregator")
        result = stack.account(scan.scan)
        assert result.outcome == FAILED and result.counted + result.spilled + result.missing == sent
        assert result.line() == f"scan 25: failed: 0 counted + 0 spilled + {sent} missing = {sent} sectors"
        assert [r.reasons for r in result.receivers] == [
            ["24 not streamed: no NodeGroup was registered when the native stream began (the aggregator dropped "
             "what came)"]] * 4
        assert result.notes == ["no file: no NodeGroup was registered when the native stream began"]
        request = records_of(stack.client.subtree(scan_prefix(scan.scan)), scan.scan).request
        assert (request.source, request.routing) == (SOURCE_NATIVE, [])
        assert all(stack.refused(f"t{r}") == {} for r in range(4))
        assert not stack.output.exists() or list(stack.output.iterdir()) == []


def test_malformed_native_headers_are_refused_and_counted_and_a_scan_still_counts(native: Stack) -> None:
    # Every class of bad message a native port can be sent, built by hand from the field list.
    import msgpack
    import zmq

    from native_sender import native_header

    payload = bytes(native.config.detector.sector_bytes)

    def head(**changes: int) -> bytes:
        fields = {"scan": 30, "frame": 500, "frames": 4, "scan_x": 4, "scan_y": 4, "x": 0, "y": 0, "thread": 0,
                  "module": 0} | changes
        return native_header(fields["scan"], fields["frame"], fields["frames"], fields["scan_x"], fields["scan_y"],
                             fields["x"], fields["y"], fields["thread"], fields["module"])

    attacks = [
        ("parts", [b"an info message has no place in a native stream"]),
        ("parts", [head(), payload, b"a third frame"]),
        ("header", [b"\xc1", payload]),
        ("header", [b"\xdd\xff\xff\xff\xff", payload]),  # declares an array of 2^32 - 1 elements
        ("header", [msgpack.packb([30, 500, 4, 3, 3, 0, 0, 0]), payload]),  # eight fields
        ("header", [msgpack.packb([30, 500, 4, 3, 3, 0, 0, 0, 0, 0]), payload]),  # ten fields
        ("header", [msgpack.packb([30, "500", 4, 3, 3, 0, 0, 0, 0]), payload]),
        ("header", [msgpack.packb([30, 2**32, 4, 3, 3, 0, 0, 0, 0]), payload]),
        ("header", [head() + b"\x00", payload]),
        ("header", [head(frames=0), payload]),
        ("header", [head(frames=17), payload]),  # more frames than the scan has positions
        ("header", [head(thread=THREADS), payload]),  # a thread the receiver does not have
        ("shape", [msgpack.packb([30, 500, 4, 65535, 3, 0, 0, 0, 0]), payload]),
        ("shape", [msgpack.packb([30, 500, 4, 2**32 - 1, 2**32 - 1, 0, 0, 0, 0]), payload]),
        ("shape", [head(scan_x=65535, scan_y=65535), payload]),  # more positions than [limits] allow
        ("position", [head(x=4), payload]),
        ("sector", [head(module=1), payload]),
        ("payload", [head(), payload[:-2]]),
        # Scan 31 opens with thread 0 announcing 4 frames; then the same thread announces 5: where
        # a receiver's own software starts scans (native_scans_requested = false) that begins a new
        # run of the scan, counted apart by the NodeGroups (SPEC.md, "Runs of a scan"), not a
        # refusal. A header giving the scan another shape contradicts it.
        (None, [head(scan=31), payload]),
        (None, [head(scan=31, frame=501, frames=5, x=1), payload]),
        ("scan", [head(scan=31, frame=502, scan_x=5, x=2), payload]),
    ]
    expected: dict[str, int] = {}
    for kind, _ in attacks:
        if kind is not None:
            expected[kind] = expected.get(kind, 0) + 1
    with zmq.Context() as context, context.socket(zmq.PUSH) as push:
        push.setsockopt(zmq.LINGER, 5000)
        push.connect(native.endpoints()[0])
        for _, frames in attacks:
            push.send_multipart(frames)
    wait_until(lambda: native.refused("t0") == expected, FILE_S, f"aggregator thread 0 to count {expected}")

    simulator = simulator_from_config(native.config)
    scan = NativeScan.shuffled(scan=32, scan_x=5, scan_y=4, first_frame=4_000_000_000, seed=8)
    stream_native(native.endpoints(), scan, THREADS, lambda p: simulator.frame(scan.scan, p),
                  native.config.detector.sector_rows)
    wait_until(lambda: (native.output / scan_file_name(scan.scan)).exists(), FILE_S, "the good scan's file")
    assert_equals_stempy(native, scan)
    assert native.refused("t0") == expected
    assert all(native.refused(f"t{r}") == {} for r in range(1, 4))
    for group in native.client.nodegroups():
        extra = native.status("nodegroup", group.uid).extra
        assert extra["malformed"] == 0, extra


def test_a_mixed_beamline_streams_native_and_sectorflow_receivers_into_one_file(make_config, tmp_path: Path) -> None:
    # Receivers 0 and 1 speak the native header, 2 and 3 SFSP, all four through sectorflow's own
    # producer daemons, with a detector frame counter starting at 1000: one acquire, one file.
    for stack in native_stack(make_config, tmp_path, ["native", "native", "sectorflow", "sectorflow"],
                              simulator={"first_frame": 1000}):
        acquired = sectorflow("acquire", "--config", stack.config.source, "--scan-number", "41", "--scan-shape",
                              "7x5", "--wait", "--timeout", "120")
        assert acquired.returncode == 0, acquired.stdout + acquired.stderr
        assert "scan 41: complete: 140 counted + 0 spilled + 0 missing = 140 sectors" in acquired.stdout
        assert_equals_stempy(stack, NativeScan(41, 7, 5, 1000, list(range(35))))
        assert [stack.status("aggregator", f"t{r}").extra["native_scans"] for r in range(4)] == [1, 1, 0, 0]
        assert all(stack.refused(f"t{r}") == {} for r in range(4))


def test_a_native_beamline_falls_back_to_raw_files_and_replays_them_into_a_later_job(make_config,
                                                                                     tmp_path: Path) -> None:
    # No NodeGroup: the native producers write the scan to raw files (the 4D Camera format, the
    # detector's frame counter inside). A job starts; the replay streams the files natively and the
    # file equals stempy's counting of the same frames, position by position.
    from sectorflow.orchestration.stack import stack_services, start_stack
    from sectorflow.protocol import find_raw_files

    config, path = make_config(
        detector=SMALL_DETECTOR, receivers=[{"host": "127.0.0.1", "threads": THREADS, "wire": "native"}] * 4,
        simulator={"bright_field_radius_px": 20.0, "first_frame": 70_000}, aggregator={"native_scan_idle_s": 2.0},
        counting={"background_threshold": BACKGROUND, "xray_threshold": XRAY}, nodegroup={"pool_frames": 64})
    output, raw = Path(config.nodegroup.output_dir), Path(config.producer.fallback_dir)
    supervisor = start_stack(config, tmp_path / "run", 2, output, False, START_S)
    try:
        def acquire(*extra: str) -> subprocess.CompletedProcess:
            return sectorflow("acquire", "--config", str(path), "--scan-number", "5", "--scan-shape", "6x4",
                              "--wait", "--timeout", "120", *extra)

        fallback = acquire()
        assert fallback.returncode == 0, fallback.stdout + fallback.stderr
        assert "scan 5: on disk, not counted: 96 on disk + 0 missing = 96 sectors" in fallback.stdout
        files = find_raw_files(str(raw), 5)
        assert len(files) == 4 * THREADS

        nodegroups = next(s for s in stack_services(config, 2, output) if s.name == "nodegroups")
        supervisor.start(nodegroups)
        with Client(client_options(config)) as client:
            wait_until(lambda: len(client.nodegroups()) == 2, START_S, "two NodeGroups to register")
            replay = acquire("--replay")
            assert replay.returncode == 0, replay.stdout + replay.stderr
            assert "scan 5: complete: 96 counted + 0 spilled + 0 missing = 96 sectors" in replay.stdout
            stack = Stack(config, output, client)
            assert [stack.status("aggregator", f"t{r}").extra["native_scans"] for r in range(4)] == [1] * 4
    finally:
        supervisor.stop_all()

    # The raw records carry the detector's counter, and the replayed file is stempy's counting of them.
    import struct

    for name in files:
        with open(name, "rb") as raw_file:
            scan_number, frame_number, *_ = struct.unpack("<IIHHHH", raw_file.read(16))
        assert scan_number == 5 and 70_000 <= frame_number < 70_024, name
    assert_equals_stempy(Stack(config, output, None), NativeScan(5, 6, 4, 70_000, list(range(24))))
