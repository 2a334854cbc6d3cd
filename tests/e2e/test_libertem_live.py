"""LiberTEM-live reads sectorflow's counted frames through the bridge (libertem_bridge/SPEC.md):
a scan through the whole stack, read by LiberTEM-live's asi_tpx3 detector with stock UDFs
(examples/libertem_udfs.py), gives per position the events the HDF5 file holds, its summed
pattern, masked sums and centre of mass; positions the live stream lost reach LiberTEM empty and
are counted; a LiberTEM client that vanishes during a scan, or that never reads, leaves the file
complete and the bridge serving the next client; the bridge's status and the scan's account count
what LiberTEM got. With [security] on, a local reader of another account with no key gets not a
byte, and a client of the bridge's own account that connects and never reads costs LiberTEM
nothing and is never said to have been sent a scan."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from keyring import Keyring
from support import Processes, sectorflow_command, stack_up, wait_until

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.protocol import ServiceStatus
from sectorflow.consumer.nodegroup import scan_file_name

pytestmark = pytest.mark.slow

DETECTOR = {"frame_rows": 128, "frame_cols": 128, "sector_rows": 32, "sector_cols": 128}
# Electrons sparse enough to be counted one by one, and at least one in every frame.
SIMULATOR = {"bright_field_radius_px": 20.0, "dose_per_frame": 80.0, "specimen": "crystal", "specimen_grain_px": 4.0}
COUNTING = {"background_threshold": 30.0, "xray_threshold": 1000.0}
SCAN_X, SCAN_Y = 24, 20
FRAMES_PER_PARTITION = 64  # 7 partitions of the scan's 480 positions, so 7 partial results or more
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "libertem_udfs.py"
MASK_RADIUS = 20.0
RING = (20.0, 40.0)
# The file's disk and ring are LiberTEM's: around the frame centre (64, 64), whole-pixel radii, so that
# pixels lie exactly on the circles (20 = |(12, 16)|, 40 = |(24, 32)|) and the edges' sides are checked.
DETECTORS = [{"name": "bright_field", "kind": "disk", "radius": MASK_RADIUS},
             {"name": "dark_field", "kind": "annulus", "inner": RING[0], "outer": RING[1]}]


def start_bridge(processes: Processes, path: Path) -> tuple[subprocess.Popen, int]:
    bridge = processes.sectorflow("libertem", "--config", str(path), "--listen", "127.0.0.1:0", name="libertem")
    found = wait_until(lambda: re.search(r"listening on 127\.0\.0\.1:(\d+)", processes.output(bridge)), 60,
                       "the bridge to listen")
    return bridge, int(found.group(1))


def wait_bridge_subscribed(client) -> None:  # type: ignore[no-untyped-def]
    wait_until(lambda: all(int(s.extra.get("live_frames_subscribers", 0)) >= 1
                           for s in client.statuses("nodegroup").values()), 30,
               "the bridge to subscribe to both NodeGroups")


def acquire(path: Path, scan: int) -> None:
    acquired = sectorflow_command("acquire", "--config", str(path), "--scan-number", str(scan), "--scan-shape",
                                  f"{SCAN_X}x{SCAN_Y}", "--wait", "--timeout", "120")
    assert acquired.returncode == 0, acquired.stdout + acquired.stderr


def start_libertem(processes: Processes, path_out: Path, port: int, scans: int = 1,
                   frames_per_partition: int = 256) -> subprocess.Popen:
    """The shipped example, as a process the ``processes`` fixture stops whatever the test did."""
    return processes.start(sys.executable, str(EXAMPLE), "--port", str(port), "--scans", str(scans), "--timeout", "120",
                           "--mask-radius", str(MASK_RADIUS), "--ring-radii", *map(str, RING), "--out", str(path_out),
                           "--frames-per-partition", str(frames_per_partition), name="libertem-live")


def finish(processes: Processes, process: subprocess.Popen) -> str:
    wait_until(lambda: process.poll() is not None, 180, "LiberTEM to finish the scan")
    out = processes.output(process)
    assert process.returncode == 0, out[-5000:]
    return out


def per_position_counts(file: Path) -> tuple[np.ndarray, object]:
    counted = read_counted_scan(file)
    assert counted.metadata["completeness"]["outcome"] == "complete"
    counts = np.array([len(e) for e in counted.events]).reshape(SCAN_Y, SCAN_X)
    return counts, counted


def served(processes: Processes, bridge: subprocess.Popen) -> dict[str, int]:
    assert processes.stop(bridge) == 0, processes.output(bridge)[-3000:]
    line = [line for line in processes.output(bridge).splitlines() if line.startswith("served: ")][-1]
    return {name: int(value) for name, value in (item.split() for item in line[len("served: "):].split(", "))}


def test_libertem_live_reads_a_scan_as_its_file_holds_it(make_config, processes: Processes, tmp_path: Path) -> None:
    config, path = make_config(detector=DETECTOR, simulator=SIMULATOR, counting=COUNTING,
                               analysis={"live_rate_hz": 5.0, "virtual_detectors": DETECTORS})
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output) as client:
        bridge, port = start_bridge(processes, path)
        wait_bridge_subscribed(client)
        libertem = start_libertem(processes, tmp_path / "result.npz", port, frames_per_partition=FRAMES_PER_PARTITION)
        wait_until(lambda: "connected (connection 1)" in processes.output(bridge), 120, "LiberTEM to connect")
        acquire(path, 3)
        out = finish(processes, libertem)
        wait_until(lambda: (output / scan_file_name(3)).exists(), 60, "the scan's file")
        counters = served(processes, bridge)

    counts, counted = per_position_counts(output / scan_file_name(3))
    result = np.load(tmp_path / "result.npz")
    # SumSigUDF: every position's events; SumUDF: the summed pattern, both as the file holds them.
    np.testing.assert_array_equal(result["intensity"], counts)
    np.testing.assert_array_equal(result["sum"], counted.images["diffraction"])
    # ApplyMasksUDF with a disk: the file's events inside the disk LiberTEM drew, per position.
    mask = result["mask"]
    inside = np.array([mask.reshape(-1)[e].sum() for e in counted.events]).reshape(SCAN_Y, SCAN_X)
    np.testing.assert_allclose(result["masked"], inside)
    # CoMUDF about the frame centre: the mean pixel of the file's events, less the centre.
    rows, cols = DETECTOR["frame_rows"], DETECTOR["frame_cols"]
    com_y = np.array([np.mean(e // cols) - rows / 2 if len(e) else 0.0 for e in counted.events]).reshape(SCAN_Y, SCAN_X)
    com_x = np.array([np.mean(e % cols) - cols / 2 if len(e) else 0.0 for e in counted.events]).reshape(SCAN_Y, SCAN_X)
    np.testing.assert_allclose(result["com_y"], com_y, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(result["com_x"], com_x, rtol=1e-4, atol=1e-3)
    # The file's own virtual images, made by the NodeGroups as they counted, are LiberTEM's stock UDFs':
    # the disk and the ring (ApplyMasksUDF with libertem.masks) and the centre of mass (CoMUDF).
    assert result["masked"].std() > 0 and result["ring"].std() > 0  # images, not constants
    np.testing.assert_array_equal(counted.images["bright_field"], result["masked"])
    np.testing.assert_array_equal(counted.images["dark_field"], result["ring"])
    np.testing.assert_allclose(counted.images["com_x"], result["com_x"], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(counted.images["com_y"], result["com_y"], rtol=1e-4, atol=1e-3)
    assert counters["scans_served"] == 1 and counters["positions_empty"] == 0 and counters["frames_late"] == 0
    assert counters["frames_sent"] == SCAN_X * SCAN_Y
    assert f"scan done: {SCAN_X * SCAN_Y} positions, {counts.sum()} electrons" in out
    # A partial result every FRAMES_PER_PARTITION positions, not one per 4,096 (LiberTEM-live's default).
    done = [int(d) for d in re.findall(r"partial: (\d+) of ", out)]
    print(f"LiberTEM partial results at positions {done}")
    assert len(done) >= SCAN_X * SCAN_Y // FRAMES_PER_PARTITION and done == sorted(done), done
    assert done[0] < SCAN_X * SCAN_Y / 4, done


def test_positions_the_live_stream_lost_arrive_empty_and_counted_and_a_vanished_client_costs_nothing(
        make_config, processes: Processes, tmp_path: Path) -> None:
    # A live feed of one frame per update: the NodeGroups leave most frames out of the live stream
    # (counted: live_feed_dropped), never out of the file.
    config, path = make_config(detector=DETECTOR, simulator=SIMULATOR, counting=COUNTING,
                               analysis={"live_rate_hz": 5.0, "live_buffer_frames": 1})
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output) as client:
        bridge, port = start_bridge(processes, path)
        wait_bridge_subscribed(client)

        # A client that reads the first header of scan 1 and goes.
        vanishing = socket.create_connection(("127.0.0.1", port))
        try:
            wait_until(lambda: "connected (connection 1)" in processes.output(bridge), 30, "the first client")
            acquire(path, 1)
            vanishing.settimeout(60)
            assert vanishing.recv(1)  # scan 1's acquisition began for it
        finally:
            vanishing.close()
        wait_until(lambda: (output / scan_file_name(1)).exists(), 60, "scan 1's file")

        libertem = start_libertem(processes, tmp_path / "result.npz", port)
        wait_until(lambda: "connected (connection 2)" in processes.output(bridge), 120, "LiberTEM to connect")
        acquire(path, 2)
        finish(processes, libertem)
        wait_until(lambda: (output / scan_file_name(2)).exists(), 60, "scan 2's file")
        log = processes.output(bridge)
        counters = served(processes, bridge)

    per_position_counts(output / scan_file_name(1))  # complete, whatever the client did
    counts, _ = per_position_counts(output / scan_file_name(2))
    intensity = np.load(tmp_path / "result.npz")["intensity"]
    assert counts.min() > 0  # so that an empty position is one the stream lost
    empty = int((intensity == 0).sum())
    # Every position LiberTEM got is the file's; the others came empty, and are counted as such.
    np.testing.assert_array_equal(intensity[intensity > 0], counts[intensity > 0])
    assert 0 < empty < SCAN_X * SCAN_Y
    scan2 = re.search(r"scan 2 served: (\d+) of (\d+) positions sent empty", log)
    assert scan2 is not None, log[-3000:]
    assert (int(scan2.group(1)), int(scan2.group(2))) == (empty, SCAN_X * SCAN_Y)
    assert counters["scans_served"] + counters["scans_unserved"] == 2 and counters["clients_gone"] >= 1


def bridge_status(client) -> ServiceStatus | None:  # type: ignore[no-untyped-def]
    """The one bridge's status in the kvstore (None before it published)."""
    statuses = client.statuses("libertem")
    assert len(statuses) <= 1, statuses
    return next(iter(statuses.values()), None)


def bridge_finished(client, scan: int) -> ServiceStatus:  # type: ignore[no-untyped-def]
    """The bridge's status once it has finished ``scan``."""
    def finished() -> ServiceStatus | None:
        status = bridge_status(client)
        return status if status is not None and status.extra.get("last_scan") == scan else None
    return wait_until(finished, 60, f"the bridge to finish scan {scan}")


def bridge_connected(client) -> bool:  # type: ignore[no-untyped-def]
    status = bridge_status(client)
    return status is not None and status.extra["client_connected"] is True


def test_a_client_that_never_reads_is_disconnected_counted_and_the_next_client_is_served(
        make_config, processes: Processes, tmp_path: Path) -> None:
    # The smallest queue the bridge may hold (1 MiB), and a scan whose stream passes it with the
    # socket buffers of a client that never reads: 96 x 96 positions of some 200 events each, about
    # 15 MB of the asi_tpx3 stream, more than loopback's largest send buffer (4 MiB) and the queue.
    config, path = make_config(detector=DETECTOR, simulator=SIMULATOR | {"dose_per_frame": 400.0}, counting=COUNTING,
                               analysis={"live_rate_hz": 5.0}, libertem={"queue_mib": 1})
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output) as client:
        bridge, port = start_bridge(processes, path)
        wait_bridge_subscribed(client)
        first = wait_until(lambda: bridge_status(client), 30, "the bridge's status")
        assert first.state == "idle" and first.extra["client_connected"] is False

        # How a stuck LiberTEM looks from the bridge: connected, reading nothing, with the smallest
        # receive buffer the kernel gives.
        stuck = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stuck.connect(("127.0.0.1", port))
            wait_until(lambda: bridge_connected(client), 30, "the stuck client in the status")
            big = sectorflow_command("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", "96x96",
                                     "--wait", "--timeout", "180")
            assert big.returncode == 0, big.stdout + big.stderr
            dropped = bridge_finished(client, 1)
        finally:
            stuck.close()
        assert dropped.extra["clients_dropped"] == 1 and dropped.extra["client_connected"] is False, (dropped, big.stdout)
        assert dropped.extra["frames_dropped"] > 0 and dropped.extra["last_scan_served"] is False
        assert dropped.extra["scans_unserved"] == 1 and dropped.extra["scans_served"] == 0
        assert "LiberTEM (bridge " in big.stdout and "not served" in big.stdout, big.stdout
        wait_until(lambda: (output / scan_file_name(1)).exists(), 60, "scan 1's file")

        libertem = start_libertem(processes, tmp_path / "result.npz", port)
        wait_until(lambda: "connected (connection 2)" in processes.output(bridge), 120, "LiberTEM to connect")
        wait_until(lambda: bridge_connected(client), 30, "LiberTEM in the status")
        scan2 = sectorflow_command("acquire", "--config", str(path), "--scan-number", "2", "--scan-shape",
                                   f"{SCAN_X}x{SCAN_Y}", "--wait", "--timeout", "120")
        assert scan2.returncode == 0, scan2.stdout + scan2.stderr
        finish(processes, libertem)
        wait_until(lambda: (output / scan_file_name(2)).exists(), 60, "scan 2's file")
        served_2 = bridge_finished(client, 2)
        status = sectorflow_command("status", "--config", str(path))
        counters = served(processes, bridge)

    counted = read_counted_scan(output / scan_file_name(1))  # whole, whatever the client did
    assert counted.metadata["completeness"]["outcome"] == "complete" and len(counted.events) == 96 * 96
    counts, _ = per_position_counts(output / scan_file_name(2))
    np.testing.assert_array_equal(np.load(tmp_path / "result.npz")["intensity"], counts)
    empty = served_2.extra["last_scan_empty"]
    assert served_2.extra["last_scan_served"] is True and served_2.extra["last_scan_positions"] == SCAN_X * SCAN_Y
    notes = [line.strip() for line in scan2.stdout.splitlines() if "LiberTEM (bridge " in line]
    assert len(notes) == 1 and f"{empty} of {SCAN_X * SCAN_Y} positions sent empty" in notes[0], scan2.stdout
    assert status.returncode == 0, status.stderr
    assert re.search(r"^libertem\s+\S+\s+idle\s+2\s", status.stdout, re.M), status.stdout
    assert "clients_dropped 1" in status.stdout
    assert f"scan 2: LiberTEM (bridge " in status.stdout
    assert counters["clients_dropped"] == 1 and counters["scans_served"] == 1 and counters["scans_unserved"] == 1


# A local reader of another account with no key: connects to the bridge and reads all it is given.
# Plain Python, no sectorflow: what anyone on the host can run.
STRANGER = """
import socket, sys
client = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
client.settimeout(60)
total = 0
while True:
    data = client.recv(1 << 16)
    if not data:
        break
    total += len(data)
print(total)
"""
NOBODY = 65534


def bridge_extra(client, name: str) -> object:  # type: ignore[no-untyped-def]
    status = bridge_status(client)
    return status.extra.get(name) if status is not None else None


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the keyless reader as another account (nobody): needs root")
def test_with_security_on_a_keyless_reader_gets_nothing_and_a_client_that_never_reads_costs_libertem_nothing(
        make_config, processes: Processes, tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "keys")
    config, path = make_config(detector=DETECTOR, simulator=SIMULATOR, counting=COUNTING,
                               analysis={"live_rate_hz": 5.0},
                               security={"enabled": True, "key_dir": str(keyring.beamline)})
    output = tmp_path / "h5"
    python = shutil.which("python3", path="/usr/bin:/bin")  # one the other account may run
    assert python is not None
    with stack_up(config, path, tmp_path / "run", output) as client:
        bridge, port = start_bridge(processes, path)
        wait_bridge_subscribed(client)
        wait_until(lambda: bridge_status(client), 30, "the bridge's status")

        # The reader of another account: closed before a byte, counted.
        stranger = subprocess.run([python, "-I", "-c", STRANGER, str(port)], user=NOBODY, group=NOBODY,
                                  extra_groups=[], cwd="/", capture_output=True, text=True, timeout=120)
        assert stranger.returncode == 0 and stranger.stdout.split() == ["0"], stranger
        wait_until(lambda: bridge_extra(client, "clients_denied") == 1, 30, "the stranger counted")

        # A client of the bridge's own account connects first and never reads; LiberTEM, beside
        # it, reads three scans as they come.
        squatter = socket.create_connection(("127.0.0.1", port))
        try:
            wait_until(lambda: bridge_extra(client, "clients") == 1, 30, "the squatter in the status")
            libertem = start_libertem(processes, tmp_path / "result.npz", port, scans=3)
            wait_until(lambda: bridge_extra(client, "clients") == 2, 120, "LiberTEM to connect")
            acquired = []
            for scan in (1, 2, 3):
                result = sectorflow_command("acquire", "--config", str(path), "--scan-number", str(scan),
                                            "--scan-shape", f"{SCAN_X}x{SCAN_Y}", "--wait", "--timeout", "120")
                assert result.returncode == 0, result.stdout + result.stderr
                acquired.append(result.stdout)
            finish(processes, libertem)
            wait_until(lambda: bridge_extra(client, "clients_dropped") == 1, 60, "the squatter dropped")
            three = bridge_finished(client, 3)
        finally:
            squatter.close()

        # A scan only a client that never reads gets: acquire may not say it was sent.
        squatter = socket.create_connection(("127.0.0.1", port))
        try:
            wait_until(lambda: bridge_extra(client, "clients") == 1, 30, "the second squatter in the status")
            fourth = sectorflow_command("acquire", "--config", str(path), "--scan-number", "4", "--scan-shape",
                                        f"{SCAN_X}x{SCAN_Y}", "--wait", "--timeout", "120")
            assert fourth.returncode == 0, fourth.stdout + fourth.stderr
            four = bridge_finished(client, 4)
        finally:
            squatter.close()
        wait_until(lambda: (output / scan_file_name(4)).exists(), 60, "scan 4's file")
        status = sectorflow_command("status", "--config", str(path))
        counters = served(processes, bridge)

    positions = SCAN_X * SCAN_Y
    for scan, out in zip((1, 2, 3), acquired):
        notes = [line.strip() for line in out.splitlines() if "LiberTEM (bridge " in line]
        assert len(notes) == 1 and re.search(rf"bridge bob\): \d+ of {positions} positions sent empty", notes[0]), \
            (scan, out)
    counts, _ = per_position_counts(output / scan_file_name(3))
    np.testing.assert_array_equal(np.load(tmp_path / "result.npz")["intensity"], counts)
    # Sent: what LiberTEM read, three scans; the squatter read nothing and was dropped.
    assert three.extra["scans_served"] == 3 and three.extra["last_scan_served"] is True, three
    assert three.extra["positions_sent"] == 3 * positions and three.messages == 3 * positions, three
    assert three.extra["clients_denied"] == 1 and three.extra["clients_dropped"] == 1
    # Scan 4: none of it sent, not served, whatever acquire waited for.
    assert "positions sent empty" not in fourth.stdout, fourth.stdout
    assert four.extra["last_scan_served"] is False and four.extra["positions_sent"] == 3 * positions, four
    assert four.extra["clients_dropped"] == 2 and four.extra["scans_unserved"] == 1
    assert status.returncode == 0, status.stderr
    assert "scan 4: LiberTEM (bridge bob): not served" in status.stdout, status.stdout
    assert counters["clients_denied"] == 1 and counters["clients_dropped"] == 2 and counters["clients_refused"] == 0
    assert counters["scans_served"] == 3 and counters["scans_unserved"] == 1


def test_up_starts_the_bridge_with_the_stack_when_asked_and_down_stops_it(
        make_config, processes: Processes, tmp_path: Path) -> None:
    from harness import free_port

    from sectorflow.orchestration import load_running

    port = free_port("127.0.0.1")
    config, path = make_config(detector=DETECTOR, simulator=SIMULATOR, counting=COUNTING,
                               analysis={"live_rate_hz": 5.0},
                               libertem={"with_stack": True, "listen": f"127.0.0.1:{port}"})
    output, run_dir = tmp_path / "h5", tmp_path / "run"
    with stack_up(config, path, run_dir, output) as client:
        # Up returned once the bridge published its status: it listens on [libertem] listen.
        assert [s.name for s in load_running(run_dir) if s.name == "libertem"] == ["libertem"]
        assert bridge_status(client) is not None
        assert f"listening on 127.0.0.1:{port}" in (run_dir / "libertem.log").read_text()
        wait_bridge_subscribed(client)
        libertem = start_libertem(processes, tmp_path / "result.npz", port)
        wait_until(lambda: bridge_connected(client), 120, "LiberTEM to connect to the stack's bridge")
        acquire(path, 1)
        finish(processes, libertem)
        wait_until(lambda: (output / scan_file_name(1)).exists(), 60, "the scan's file")
    counts, _ = per_position_counts(output / scan_file_name(1))
    np.testing.assert_array_equal(np.load(tmp_path / "result.npz")["intensity"], counts)
    # Down stopped it with the rest: nothing listens on its port.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
