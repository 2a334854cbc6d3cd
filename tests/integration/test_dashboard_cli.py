"""`sectorflow dashboard` as a user runs it: its errors, its stop, and an operator's POSTs."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import write_toml
from support import Processes, wait_until

from sectorflow.kvstore import Client
from sectorflow.protocol import ACQUIRE_REQUEST_KEY, AcquireRequest

import starlette  # noqa: E402,F401  (the dashboard extra, which make test installs: absent is a failure)

RUN_S = 60.0  # deadline of a one-shot command; a failure guard only
TOKEN = "a-token-of-at-least-16-characters"


def sectorflow(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True,
                          timeout=RUN_S, stdin=subprocess.DEVNULL)


def one_error(result: subprocess.CompletedProcess) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("sectorflow dashboard: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    return errors[0]


def get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.read()
    except OSError:
        return None


def post(url: str, body: dict[str, Any], token: str | None) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_help_explains_the_command() -> None:
    result = sectorflow("dashboard", "--help")
    assert result.returncode == 0
    assert "--bind" in result.stdout and "/metrics" in result.stdout and "control_token_file" in result.stdout


def test_a_taken_port_is_one_line_naming_the_address(make_config: Callable) -> None:
    config, path = make_config()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", config.dashboard.port))
        holder.listen()
        result = sectorflow("dashboard", "--config", str(path))
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{config.dashboard.port}: Address already in use" in one_error(result)


def test_binding_beyond_loopback_without_security_is_refused(make_config: Callable) -> None:
    _, path = make_config()
    result = sectorflow("dashboard", "--config", str(path), "--bind", "0.0.0.0:8750")
    assert result.returncode == 2
    assert "listens beyond this machine without security" in one_error(result)
    data = tomllib.loads(path.read_text())
    data["dashboard"]["bind_host"] = "0.0.0.0"
    result = sectorflow("dashboard", "--config", str(write_toml(data, path.with_name("everywhere.toml"))))
    assert result.returncode == 2
    assert "'dashboard.bind_host' = '0.0.0.0' listens beyond this machine without security" in one_error(result)


def test_an_unreadable_token_file_is_one_line(make_config: Callable, tmp_path: Path) -> None:
    _, path = make_config(dashboard={"control_token_file": str(tmp_path / "absent")})
    result = sectorflow("dashboard", "--config", str(path))
    assert result.returncode == 2
    assert "'dashboard.control_token_file'" in one_error(result) and "No such file" in one_error(result)


def test_without_a_kvstore_the_page_says_unreachable_and_sigterm_stops_it_cleanly(
        make_config: Callable, processes: Processes) -> None:
    config, path = make_config()
    dashboard = processes.sectorflow("dashboard", "--config", str(path), name="dashboard")
    url = config.dashboard.url()
    state = wait_until(lambda: get(url + "api/state") not in (None, b"{}") and json.loads(get(url + "api/state")),
                       RUN_S, "the dashboard's state")
    assert state["kvstore"]["reachable"] is False
    assert b"<title>sectorflow</title>" in get(url)
    assert b"sectorflow_kvstore_reachable 0.0" in get(url + "metrics")
    dashboard.send_signal(signal.SIGTERM)
    assert processes.supervisor.wait("dashboard", RUN_S) == 0
    assert "Traceback" not in processes.output(dashboard)


def test_with_the_token_an_operator_requests_a_scan_and_without_it_is_refused(
        make_config: Callable, processes: Processes, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    config, path = make_config(dashboard={"control_token_file": str(token_file)})
    processes.sectorflow("kvstore", "--config", str(path), name="kvstore")
    processes.sectorflow("dashboard", "--config", str(path), name="dashboard")
    url = config.dashboard.url()
    wait_until(lambda: get(url + "healthz") == b"ok", RUN_S, "the dashboard to serve")
    scan = {"scan_number": 12, "scan_x": 3, "scan_y": 2, "rate_hz": 5}
    assert post(url + "api/scans", scan, None)[0] == 401
    code, answer = post(url + "api/scans", scan, "wrong-token-wrong-token")
    assert code == 401 and "missing or wrong token" in answer["error"]
    code, answer = post(url + "api/scans", {**scan, "scan_x": 0}, TOKEN)
    assert code == 400 and answer["error"] == "scan_x = 0: expected an integer from 1 to 65535"
    code, answer = post(url + "api/scans", {**scan, "padding": "x" * 100_000}, TOKEN)
    assert code == 413 and "larger than 16384 bytes" in answer["error"]
    metrics = get(url + "metrics") or b""
    for status, count in (("401", 2), ("400", 1), ("413", 1)):
        assert f'sectorflow_dashboard_refused_requests_total{{status="{status}"}} {count}.0'.encode() in metrics
    code, answer = post(url + "api/scans", scan, TOKEN)
    assert code == 200, answer
    assert answer["message"] == "scan 12: requested 3 x 2, no NodeGroup registered: written to raw files"
    with Client.from_config(config, name="test") as client:
        assert client.wait_synced(RUN_S)
        request = wait_until(lambda: client.get(ACQUIRE_REQUEST_KEY), RUN_S, "the request in the kvstore")
    decoded = AcquireRequest.decode(request)
    assert (decoded.scan_number, decoded.scan_x, decoded.scan_y, decoded.rate_hz) == (12, 3, 2, 5.0)
    assert wait_until(lambda: json.loads(get(url + "api/state")).get("control"), RUN_S, "the page's state")


def post_raw(url: str, body: bytes, token: str) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


# What the issue sent, and wrong types of every field: each is a 400, never a 500.
MALFORMED = [
    ("api/scans", b'{"scan_number": Infinity, "scan_x": 3, "scan_y": 2}'),
    ("api/scans", b'{"scan_number": -Infinity, "scan_x": 3, "scan_y": 2}'),
    ("api/scans", b'{"scan_number": NaN, "scan_x": 3, "scan_y": 2}'),
    ("api/scans", b'{"scan_number": 1e400, "scan_x": 3, "scan_y": 2}'),
    ("api/scans", b'{"scan_number": 7, "scan_x": 3, "scan_y": 2, "rate_hz": 1e400}'),
    ("api/scans", b"[" * 16000),
    ("api/scans", b'{"a":' * 2500 + b"1" + b"}" * 2500),
    ("api/scans", b'{"scan_number": "seven", "scan_x": 3, "scan_y": 2}'),
    ("api/scans", b'{"scan_number": [7], "scan_x": 3, "scan_y": 2}'),
    ("api/scans", b'{"scan_number": 7, "scan_x": {}, "scan_y": 2}'),
    ("api/scans", b'{"scan_number": 7, "scan_x": true, "scan_y": 2}'),
    ("api/scans", b'{"scan_number": 7, "scan_x": 3, "scan_y": 2, "rate_hz": [1]}'),
    ("api/scans", b'{"scan_number": 7, "scan_x": 3, "scan_y": 2, "rate_hz": "fast"}'),
    ("api/scans", b'"a string"'),
    ("api/scans", b"\xff\xfe{}"),
    ("api/sessions", b'{"nodes": Infinity}'),
    ("api/sessions", b'{"nodes": 1e400}'),
    ("api/sessions", b'{"nodes": {"a": 1}}'),
]


def test_every_malformed_body_of_an_authorised_post_is_400_never_500(
        make_config: Callable, processes: Processes, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    config, path = make_config(dashboard={"control_token_file": str(token_file)})
    processes.sectorflow("kvstore", "--config", str(path), name="kvstore")
    dashboard = processes.sectorflow("dashboard", "--config", str(path), name="dashboard")
    url = config.dashboard.url()
    wait_until(lambda: get(url + "healthz") == b"ok", RUN_S, "the dashboard to serve")
    answers = {(route, body[:40]): post_raw(url + route, body, TOKEN) for route, body in MALFORMED}
    assert {key: code for key, (code, _) in answers.items() if code != 400} == {}
    metrics = get(url + "metrics") or b""
    assert f'sectorflow_dashboard_refused_requests_total{{status="400"}} {len(MALFORMED)}.0'.encode() in metrics
    assert get(url + "healthz") == b"ok"
    assert "Traceback" not in processes.output(dashboard)


def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(
        make_config: Callable, processes: Processes) -> None:
    config, path = make_config(dashboard={"idle_timeout_s": 1})
    processes.sectorflow("kvstore", "--config", str(path), name="kvstore")
    processes.sectorflow("dashboard", "--config", str(path), name="dashboard")
    url = config.dashboard.url()
    wait_until(lambda: get(url + "healthz") == b"ok", RUN_S, "the dashboard to serve")
    idle = socket.create_connection(("127.0.0.1", config.dashboard.port))
    partial = socket.create_connection(("127.0.0.1", config.dashboard.port))
    kept = socket.create_connection(("127.0.0.1", config.dashboard.port))
    try:
        partial.sendall(b"GET /api/state HTTP/1.1\r\nHost: x\r\n")  # never the blank line
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        for connection in (idle, partial, kept):
            connection.settimeout(RUN_S)  # a guard: the server closes it long before
        assert idle.recv(1024) == b""  # closed by the server, without a word
        assert partial.recv(1024) == b""
        answer = b""
        while chunk := kept.recv(65536):  # the answer, then the close once the keep-alive ran out
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")
    finally:
        for connection in (idle, partial, kept):
            connection.close()


def test_with_security_on_a_bind_beyond_loopback_without_a_certificate_is_one_line(
        make_config: Callable, tmp_path: Path) -> None:
    from keyring import Keyring

    keyring = Keyring(tmp_path / "keys")
    _, path = make_config(security={"enabled": True, "key_dir": str(keyring.beamline)},
                          dashboard={"bind_host": "0.0.0.0"})
    result = sectorflow("dashboard", "--config", str(path))
    assert result.returncode == 2
    assert "listens beyond this machine with [security] on but no TLS certificate" in one_error(result)
    result = sectorflow("dashboard", "--config", str(path), "--bind", "0.0.0.0:8750")
    assert "no TLS certificate" in one_error(result)
