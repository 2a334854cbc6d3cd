"""The dashboard beyond loopback, secured: on the aggregator host of the netlab,
bound to its network address with [security] on, it speaks only TLS (uvicorn's, from
[dashboard] ssl_certfile/ssl_keyfile) and serves a reader on another host only with the viewer's
token (as a header, or the cookie a browser gets from /?token=)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.netlab import Topology
from harness.netlab.stack import netlab_config
from keyring import Keyring
from support import Processes, wait_until

START_S = 60.0  # deadlines: failure guards only
PORT = 8750
VIEW_TOKEN = "the-viewers-token-of-16-or-more"

# One HTTPS request from the host it runs on; prints "<status> <body's first bytes>" or "error <reason>".
CLIENT = """
import ssl, sys, urllib.error, urllib.request
url, token, cookie = sys.argv[1], sys.argv[2], sys.argv[3]
context = ssl._create_unverified_context()  # the test's self-signed certificate
headers = {**({"Authorization": "Bearer " + token} if token else {}), **({"Cookie": cookie} if cookie else {})}
try:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10, context=context) as answer:
        print(answer.status, answer.headers.get("set-cookie", "-"), answer.read().decode(errors="replace"))
except urllib.error.HTTPError as refused:
    print(refused.code, "-", refused.read(200).decode(errors="replace"))
except OSError as error:
    print("error", error)
"""


def self_signed(folder: Path, address: str) -> tuple[Path, Path]:
    cert, key = folder / "dashboard.pem", folder / "dashboard.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={address}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


def test_beyond_loopback_the_dashboard_speaks_tls_and_reads_need_the_viewers_token(
        processes: Processes, tmp_path: Path) -> None:
    keys = Keyring(tmp_path / "keys")
    token_file = tmp_path / "view-token"
    token_file.write_text(VIEW_TOKEN + "\n")
    with Topology() as net:
        host = net.address("agg")
        cert, key = self_signed(tmp_path, host)
        _, path = netlab_config(tmp_path, security={"enabled": True, "allow_insecure": False,
                                                    "key_dir": str(keys.beamline)},
                                dashboard={"bind_host": host, "port": PORT, "view_token_file": str(token_file),
                                           "ssl_certfile": str(cert), "ssl_keyfile": str(key)})
        dashboard = processes.start(*net.command("agg", [sys.executable, "-m", "sectorflow", "dashboard", "--config",
                                                         str(path)]), name="dashboard")

        def fetch(role: str, url: str, token: str = "", cookie: str = "") -> str:
            result = subprocess.run(net.command(role, [sys.executable, "-c", CLIENT, url, token, cookie]),
                                    capture_output=True, text=True, timeout=START_S)
            return result.stdout.strip()

        base = f"https://{host}:{PORT}/"
        wait_until(lambda: fetch("recv1", base + "healthz").startswith("200"), START_S, "the dashboard over TLS")
        for route in ("", "api/state", "metrics", "events"):
            assert fetch("recv1", base + route).startswith("401"), route
            assert fetch("recv1", base + route, token="a-wrong-token-of-some-length").startswith("401"), route
        assert fetch("recv1", base + "api/state", token=VIEW_TOKEN).startswith("200")
        assert "sectorflow_kvstore_reachable" in fetch("recv1", base + "metrics", token=VIEW_TOKEN)
        # A browser: /?token= once, then the cookie carries it (an event stream sends no header).
        first = fetch("recv1", base + f"?token={VIEW_TOKEN}")
        assert first.startswith("200") and "sectorflow_token=" in first and "HttpOnly" in first, first
        assert fetch("recv1", base + "api/state", cookie=f"sectorflow_token={VIEW_TOKEN}").startswith("200")
        # No plain HTTP on that port.
        plain = fetch("recv1", f"http://{host}:{PORT}/healthz")
        assert plain.startswith("error") or plain.startswith("400"), plain
        # Every refused read counted: 4 routes without a token, 4 with a wrong one.
        assert "sectorflow_dashboard_refused_reads_total 8.0" in fetch("recv1", base + "metrics", token=VIEW_TOKEN)
        processes.stop(dashboard)
        assert "Traceback" not in processes.output(dashboard)
