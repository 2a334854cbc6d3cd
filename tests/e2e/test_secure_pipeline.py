"""The pipeline with [security] on: `sectorflow up` from a configuration to an HDF5 file, and a
Slurm streaming session whose NodeGroups get their keys from the private directory the submission
made. Every party holds its role's key from tests/keyring.py; nothing is refused on the way."""

from __future__ import annotations

import contextlib
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from keyring import Keyring
from support import wait_until

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.protocol import ServiceStatus, status_key
from sectorflow.security.session_keys import PREFIX

pytestmark = pytest.mark.mpi


def sectorflow(*args: str, env: dict[str, str] | None = None, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True, env=env,
                          timeout=timeout_s)


def refusals(client: Client) -> tuple[int, int]:
    raw = client.get(status_key("kvstore", "server"))
    extra = ServiceStatus.decode(raw).extra if raw is not None else {}
    return extra.get("unauthenticated", -1), extra.get("unauthorised", -1)


def test_up_acquire_down_with_every_socket_secured(make_config, tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "keys")
    config, path = make_config(security={"enabled": True, "key_dir": str(keyring.beamline)})
    run_dir = tmp_path / "run"
    up = sectorflow("up", "--config", str(path), "--run-dir", str(run_dir), "--output", str(tmp_path / "h5"))
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        acquired = sectorflow("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape", "4x4",
                              "--wait", "--timeout", "120")
        assert acquired.returncode == 0, acquired.stdout + acquired.stderr
        h5 = tmp_path / "h5" / scan_file_name(1)
        wait_until(h5.exists, 60, "scan 1's file")
        counted = read_counted_scan(h5)
        assert counted.scan_shape == (4, 4) and len(counted.missing_positions) == 0
        with Client.from_config(config, name="test") as client:
            assert client.wait_synced(30)
            wait_until(lambda: refusals(client) == (0, 0), 30, "the server's status: nothing refused")
        status = sectorflow("status", "--config", str(path))
        assert status.returncode == 0, status.stderr
        assert "unauthenticated 0, unauthorised 0" in status.stdout
        assert not any(keyring.pair(role)[1] in status.stdout for role in ("kvstore", "aggregator", "nodegroup"))
    finally:
        down = sectorflow("down", "--config", str(path), "--run-dir", str(run_dir))
    assert down.returncode == 0, down.stderr
    for log in run_dir.glob("*.log"):
        text = log.read_text(errors="replace")
        for role in ("kvstore", "aggregator", "producer", "nodegroup", "operator", "viewer"):
            assert keyring.pair(role)[1] not in text, f"a {role} secret in {log.name}"


def test_the_live_stream_of_a_secured_stack_serves_the_viewer_key_and_no_keyless_crowd(make_config,
                                                                                       tmp_path: Path) -> None:
    import zmq

    keyring = Keyring(tmp_path / "keys")
    config, path = make_config(security={"enabled": True, "key_dir": str(keyring.beamline)})
    run_dir = tmp_path / "run"
    up = sectorflow("up", "--config", str(path), "--run-dir", str(run_dir), "--output", str(tmp_path / "h5"))
    context = zmq.Context()
    view = None
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        with Client.from_config(config, name="test") as client:
            assert client.wait_synced(30)

            def live(field: str) -> list:
                return [s.extra.get(field) for s in client.statuses("nodegroup").values()]

            endpoints = wait_until(lambda: all(live("live_images")) and live("live_images"), 60, "the live endpoints")
            assert all(key == keyring.public("nodegroup") for key in live("live_key"))
            crowd = []
            for endpoint in endpoints:
                for _ in range(40):  # more keyless subscribers than a stream has slots
                    socket = context.socket(zmq.DEALER)
                    socket.linger = 0
                    socket.connect(endpoint)
                    # A keyless peer may have no connection to queue on (its handshakes fail): never block.
                    with contextlib.suppress(zmq.Again):
                        socket.send(b"subscribe", zmq.DONTWAIT)
                    crowd.append(socket)
            view = subprocess.Popen([sys.executable, "-m", "sectorflow", "view", "--config", str(path), "--scan", "2",
                                     "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # Two subscribers per NodeGroup, both with the viewer key: the dashboard `up` started and the view.
            wait_until(lambda: live("live_images_subscribers") == [2] * len(endpoints), 60,
                       "the dashboard and the view, and no one else, subscribed to every NodeGroup")
            wait_until(lambda: sum(live("live_handshakes_refused")) >= 40 * len(endpoints), 60,
                       "every keyless handshake refused and counted")
            # And on the dashboard's /metrics (read from loopback: no token needed).
            import re
            import urllib.request


            def metric_total() -> int:
                with urllib.request.urlopen(config.dashboard.url() + "metrics", timeout=10) as answer:
                    text = answer.read().decode()
                return sum(int(float(v)) for v in re.findall(
                    r'sectorflow_refused_messages_total\{[^}]*kind="live_handshakes_refused"[^}]*\} (\S+)', text))

            wait_until(lambda: metric_total() >= 40 * len(endpoints), 60, "the refusals in /metrics")
            acquired = sectorflow("acquire", "--config", str(path), "--scan-number", "2", "--scan-shape", "6x4",
                                  "--wait", "--timeout", "120")
            assert acquired.returncode == 0, acquired.stdout + acquired.stderr
            out, err = view.communicate(timeout=130)
            assert view.returncode == 0, err[-2000:]
            assert "scan 2: 24 of 24 positions counted (complete)" in out, out[-1000:]
            assert not any(socket.poll(0) for socket in crowd)
    finally:
        if view is not None and view.poll() is None:
            view.kill()
            view.communicate()
        context.destroy(linger=0)
        down = sectorflow("down", "--config", str(path), "--run-dir", str(run_dir))
    assert down.returncode == 0, down.stderr


@pytest.mark.slurm
def test_a_secured_session_takes_its_keys_from_a_private_directory(slurm, slurm_env, make_config, processes,
                                                                   tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "keys")
    config, path = make_config(
        security={"enabled": True, "key_dir": str(keyring.beamline)},
        slurm={"nodes": 1, "tasks_per_node": 1, "launcher": "mpiexec", "time": "00:10:00"},
    )
    env = {**slurm_env}
    for service in ("kvstore", "aggregator"):
        processes.sectorflow(service, "--config", str(path), name=service, env=env)
    for receiver in range(config.n_receivers):
        processes.sectorflow("producer", "--config", str(path), "--receiver", str(receiver),
                             name=f"producer-{receiver}", env=env)
    sessions = tmp_path / "sessions"
    job = sectorflow("session", "submit", "--config", str(path), "--log-dir", str(sessions), env=env)
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.split()[3]
    try:
        [key_dir] = sessions.glob(f"{PREFIX}*")
        assert stat.S_IMODE(key_dir.stat().st_mode) == 0o700
        with Client.from_config(config, name="e2e") as client:
            wait_until(lambda: len(client.nodegroups()) == config.nodegroup.groups_per_rank, 120,
                       "the session's NodeGroups to register")
            acquired = sectorflow("acquire", "--config", str(path), "--scan-number", "3", "--scan-shape", "4x4",
                                  "--wait", "--timeout", "120", env=env)
            assert acquired.returncode == 0, acquired.stdout + acquired.stderr
            assert refusals(client) == (0, 0)
        assert (Path(config.nodegroup.output_dir) / scan_file_name(3)).exists()
    finally:
        cancelled = sectorflow("session", "cancel", "--config", str(path), job_id, env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    log = sessions / f"sectorflow-session-{job_id}.log"
    wait_until(lambda: log.exists() and "stopped" in log.read_text(errors="replace"), 60, "the session to stop")
    text = log.read_text(errors="replace")
    assert keyring.pair("nodegroup")[1] not in text
