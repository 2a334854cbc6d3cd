"""What arrives for a scan number outside the scan's real run, sent the way a stray native message that
once ended a port's count was sent, on a running stack (`sectorflow up`): a stray native header before the
scan (at once, and after `native_scan_idle_s`), one beside it and one after it, and a valid header of a
scan nobody announced sent straight to a NodeGroup. The real scan comes out whole every time, and the
stray is counted in a status."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import zmq
from native_sender import native_header
from support import stack_up, wait_until

from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.protocol import (DataHeader, InfoMessage, ScanFileRecord, ServiceStatus, encode_header, encode_info,
                                 scan_file_key, scan_prefix, status_key)
from sectorflow.operations.scan_account import account, records_of

pytestmark = pytest.mark.mpi

SMALL_DETECTOR = {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}
THREADS = 2
IDLE_S = 2.0
WAIT_S = 60.0
WHOLE = "complete: 1024 counted + 0 spilled + 0 missing = 1024 sectors"


@dataclass
class Stack:
    config: Config
    path: Path
    output: Path
    client: Client

    def status(self, service: str, name: str) -> dict:
        raw = self.client.get(status_key(service, name))
        return ServiceStatus.decode(raw).extra if raw is not None else {}

    def acquire(self, scan: int, rate_hz: int = 100) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "sectorflow", "acquire", "--config", str(self.path),
                                 "--scan-number", str(scan), "--scan-shape", "16x16", "--rate", str(rate_hz),
                                 "--wait", "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def stray(self, scan: int) -> None:
        """That stray message: [scan, 0, 1, 15, 15, 0, 0, 0, 0] and one sector, to receiver 0's port."""
        agg = self.config.aggregator
        with zmq.Context() as context, context.socket(zmq.PUSH) as push:
            push.setsockopt(zmq.LINGER, 5000)
            push.connect(f"tcp://{agg.host}:{agg.base_port}")
            push.send_multipart([native_header(scan, 0, 1, 16, 16, 0, 0, 0, 0),
                                 bytes(self.config.detector.sector_bytes)])

    def stray_sfsp(self, scan: int, with_data: bool, receiver: int = 1) -> None:
        """An SFSP producer thread's info (1 message for the first NodeGroup), and its one sector
        ``with_data``, to receiver ``receiver``'s port, as a stray or a restarted sender would."""
        agg, uid = self.config.aggregator, self.client.nodegroups()[0].uid
        info = InfoMessage(scan_number=scan, receiver=receiver, thread_id=0, scan_x=16, scan_y=16, routing=[uid],
                           counts={uid: 1})
        header = DataHeader(scan_number=scan, frame_number=0, sector=receiver, scan_x=16, scan_y=16, position_x=0,
                            position_y=0)
        with zmq.Context() as context, context.socket(zmq.PUSH) as push:
            push.setsockopt(zmq.LINGER, 5000)
            push.connect(f"tcp://{agg.host}:{agg.base_port + receiver}")
            push.send(encode_info(info))
            if with_data:
                push.send_multipart([encode_header(header), bytes(self.config.detector.sector_bytes)])

    def assert_whole(self, scan: int, acquired: subprocess.Popen, unannounced: str = "") -> None:
        """The acquire exits 0 with every sector counted, the file lacks nothing, and no NodeGroup
        refused, dropped or took for unannounced anything (but one scan, at ``unannounced``)."""
        out, err = acquired.communicate(timeout=180)
        assert acquired.returncode == 0, out + err
        assert f"scan {scan}: {WHOLE}" in out, out
        counted = read_counted_scan(self.output / scan_file_name(scan))
        assert counted.missing_positions.tolist() == [] and counted.incomplete_positions.tolist() == []
        for group in self.client.nodegroups():
            extra = self.status("nodegroup", group.uid)
            expected = (0, 0, 1 if group.uid == unannounced else 0)
            assert (extra["malformed"], extra["late_messages"], extra["unannounced_scans"]) == expected, extra


@pytest.fixture
def stack(make_config, tmp_path: Path) -> Iterator[Stack]:
    # Receiver 0 speaks the native header through sectorflow's producer daemon, the others SFSP.
    config, path = make_config(
        detector=SMALL_DETECTOR,
        receivers=[{"host": "127.0.0.1", "threads": THREADS, "wire": wire}
                   for wire in ("native", "sectorflow", "sectorflow", "sectorflow")],
        aggregator={"native_scan_idle_s": IDLE_S}, nodegroup={"pool_frames": 64, "scan_timeout_s": 5.0})
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output) as client:
        yield Stack(config, path, output, client)


@pytest.mark.parametrize("after_idle", [False, True], ids=["at-once", "after-native-scan-idle"])
def test_a_stray_native_header_before_a_scan_opens_nothing_and_the_scan_comes_out_whole(stack: Stack,
                                                                                       after_idle: bool) -> None:
    stack.stray(7)
    wait_until(lambda: stack.status("aggregator", "t0").get("malformed_no_info") == 1, WAIT_S,
               "relay thread 0 to refuse the stray")
    sent_s = time.monotonic()
    # It opened no run: no routing was fixed, no request record written, nothing reached a NodeGroup.
    assert records_of(stack.client.subtree(scan_prefix(7)), 7).request is None
    assert account(records_of(stack.client.subtree(scan_prefix(7)), 7)).notes == [
        "no request record (no 'sectorflow acquire' asked for the scan and no native stream began it, or its records "
        "expired or were refused)"]
    assert stack.status("aggregator", "t0")["native_scans"] == 0
    if after_idle:  # the case where the stray's run, had it opened, would have closed
        wait_until(lambda: time.monotonic() - sent_s > IDLE_S, 2 * IDLE_S + WAIT_S, "native_scan_idle_s to pass")

    stack.assert_whole(7, stack.acquire(7))
    t0 = stack.status("aggregator", "t0")
    assert (t0["native_scans"], t0["malformed"], t0["malformed_no_info"], t0["lost"]) == (1, 1, 1, 0), t0


def test_a_stray_native_header_beside_or_after_a_scan_is_refused_and_the_scan_comes_out_whole(stack: Stack) -> None:
    acquired = stack.acquire(8, rate_hz=50)
    wait_until(lambda: stack.status("aggregator", "t0").get("open_scans") == 1 or acquired.poll() is not None,
               WAIT_S, "scan 8 to open at relay thread 0")
    stack.stray(8)
    wait_until(lambda: stack.status("aggregator", "t0").get("malformed_scan") == 1, WAIT_S,
               "relay thread 0 to refuse the stray")
    stack.assert_whole(8, acquired)
    assert stack.status("aggregator", "t0")["malformed"] == 1

    # And after it: refused the same way, before it can open a run whose record would replace the
    # real run's; the scan's account stays whole.
    # (read as the account reads it: the scan may be folded into its summary, kvstore/SPEC.md "Folding")
    relay_record = records_of(stack.client.subtree(scan_prefix(8)), 8).relays.get(0)
    assert relay_record is not None
    stack.stray(8)
    wait_until(lambda: stack.status("aggregator", "t0").get("malformed_scan") == 2, WAIT_S,
               "relay thread 0 to refuse the stray after the scan")
    assert records_of(stack.client.subtree(scan_prefix(8)), 8).relays.get(0) == relay_record
    assert account(records_of(stack.client.subtree(scan_prefix(8)), 8)).line().startswith(f"scan 8: {WHOLE}")
    assert stack.status("aggregator", "t0")["native_scans"] == 1


def test_data_of_a_scan_nobody_announced_makes_no_file_and_is_counted(stack: Stack) -> None:
    # One valid 2048 x 2048 header straight to a NodeGroup's port 0: no acquire, no aggregator.
    group = stack.client.nodegroups()[0]
    header = DataHeader(scan_number=9, frame_number=0, sector=0, scan_x=2048, scan_y=2048, position_x=0,
                        position_y=0)
    with zmq.Context() as context, context.socket(zmq.PUSH) as push:
        push.setsockopt(zmq.LINGER, 5000)
        push.connect(group.endpoint(0))
        push.send_multipart([encode_header(header), bytes(stack.config.detector.sector_bytes)])
    extra = wait_until(lambda: (e := stack.status("nodegroup", group.uid)).get("unannounced_scans") == 1 and e,
                       WAIT_S, "the NodeGroup to refuse the unannounced scan")
    assert extra["unannounced_messages"] == 1
    assert records_of(stack.client.subtree(scan_prefix(9)), 9).file is None
    assert not stack.output.exists() or list(stack.output.iterdir()) == []

    # The stack goes on: the next scan is whole, and its file is the only one.
    stack.assert_whole(10, stack.acquire(10), unannounced=group.uid)
    assert sorted(p.name for p in stack.output.iterdir()) == [scan_file_name(10)]


def test_a_file_record_rewritten_to_count_more_than_the_scan_has_is_named_in_the_account(stack: Stack) -> None:
    # Without [security] anyone may write under scans/ (kvstore/SPEC.md, "Security"): a peer rewrites a
    # whole scan's file record with 300 sectors per receiver of a 256-position scan. No run writes
    # that; the account says the records disagree instead of calling sectors missing.
    stack.assert_whole(11, stack.acquire(11))
    # Read as the account reads it: from its key, or from the scan's summary once the server folded it.
    real = records_of(stack.client.subtree(scan_prefix(11)), 11).file
    assert real is not None
    forged = ScanFileRecord(outcome=real.outcome, path=real.path, extra_paths=list(real.extra_paths),
                            positions=real.positions, frames_written=real.frames_written,
                            positions_missing=real.positions_missing, sectors_counted=[300] * 4, reason=real.reason,
                            written_s=real.written_s)
    stack.client.set_once(scan_file_key(11), forged.encode())
    result = wait_until(lambda: (a := account(records_of(stack.client.subtree(scan_prefix(11)), 11))).counted == 1200
                        and a, WAIT_S, "the rewritten file record")
    assert [r.reasons for r in result.receivers] == [["44 more sectors accounted than the scan has"]] * 4
    assert (result.counted, result.spilled, result.missing) == (1200, 0, -176)


def test_a_stray_sfsp_info_beside_or_after_a_scan_is_refused_and_the_scan_comes_out_whole(stack: Stack) -> None:
    # The SFSP dialect's stray: a producer thread's info whose counts its scan record does not
    # announce. Beside the run it would close the real run unfinished (as a replay's info does: the
    # scan lost 639 of 1024 sectors so), after it open a run whose record replaces the scan's; it is
    # refused before either. (A stray data message beside the run joins it: docs/fault-model.md.)
    acquired = stack.acquire(12, rate_hz=50)
    wait_until(lambda: stack.status("aggregator", "t1").get("open_scans") == 1 or acquired.poll() is not None,
               WAIT_S, "scan 12 to open at relay thread 1")
    stack.stray_sfsp(12, with_data=False)
    wait_until(lambda: stack.status("aggregator", "t1").get("malformed_scan") == 1, WAIT_S,
               "relay thread 1 to refuse the stray info")
    stack.assert_whole(12, acquired)

    relay_record = records_of(stack.client.subtree(scan_prefix(12)), 12).relays.get(1)
    assert relay_record is not None
    stack.stray_sfsp(12, with_data=True)
    wait_until(lambda: stack.status("aggregator", "t1").get("malformed_scan") == 2, WAIT_S,
               "relay thread 1 to refuse the stray info after the scan")
    assert records_of(stack.client.subtree(scan_prefix(12)), 12).relays.get(1) == relay_record
    assert account(records_of(stack.client.subtree(scan_prefix(12)), 12)).line().startswith(f"scan 12: {WHOLE}")

