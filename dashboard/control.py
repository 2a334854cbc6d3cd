"""What an operator may do from the page: request a scan, submit or cancel a streaming session.

Read-only unless ``[dashboard] control_token_file`` names a file holding a token: then a POST
carrying ``Authorization: Bearer <token>`` may act, anything else is refused (403 read-only, 401
wrong or missing token). The actions are the command line's own (``sectorflow acquire``'s
``publish_request``, ``sectorflow session submit`` / ``cancel``); the kvstore writes go through a
client of role operator, so with ``[security]`` on this host needs an operator key, checked at start.
"""

from __future__ import annotations

import hmac
import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from sectorflow.configs import Config, ConfigError
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client

log = logging.getLogger(__name__)


class Refused(SectorflowError):
    """A POST the dashboard will not carry out; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def read_token(config: Config, key: str = "control_token_file") -> str | None:
    """The token of the file ``[dashboard] key`` names (the control token, or with
    ``view_token_file`` the viewer's), None if it names none. Raises ConfigError for an unusable file."""
    name = getattr(config.dashboard, key)
    if not name:
        return None
    path = Path(name)
    try:
        token = path.read_text().strip()
    except OSError as error:
        raise ConfigError(f"{config.source}: 'dashboard.{key}' = {name!r}: cannot read it: "
                          f"{error.strerror}") from None
    if len(token) < 16:
        raise ConfigError(f"{config.source}: 'dashboard.{key}' = {name!r}: the token must be at least "
                          "16 characters (e.g. 'python3 -c \"import secrets; print(secrets.token_urlsafe())\"')")
    return token


class Controller:
    """Carries out the operator's POSTs after checking their token."""

    def __init__(self, config: Config, token: str | None) -> None:
        self.config = config
        self._token = token
        self._lock = threading.Lock()  # one action at a time: they are rare and each waits on the kvstore
        self._client: Client | None = None

    @property
    def enabled(self) -> bool:
        return self._token is not None

    def open(self) -> None:
        """Connects the operator's kvstore client (a missing operator key fails here, at start)."""
        if self.enabled:
            self._client = Client.from_config(self.config, name="dashboard-operator", role="operator")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def check(self, authorization: str | None) -> None:
        """Raises Refused unless ``authorization`` (the request's header) carries the token."""
        if self._token is None:
            raise Refused(403, "this dashboard is read-only: set [dashboard] control_token_file to let an operator "
                               "act from it")
        given = (authorization or "").removeprefix("Bearer ").strip()
        if not given or not hmac.compare_digest(given.encode(), self._token.encode()):
            raise Refused(401, "missing or wrong token: send 'Authorization: Bearer <token>' with the token of "
                               "[dashboard] control_token_file")

    def request_scan(self, body: dict[str, Any]) -> str:
        """``sectorflow acquire`` without --wait: publishes the request; returns what was asked."""
        from sectorflow.operations.acquire import publish_request

        scan = _integer(body, "scan_number", 0, 0xFFFFFFFF)
        scan_x, scan_y = _integer(body, "scan_x", 1, 65535), _integer(body, "scan_y", 1, 65535)
        rate = _number(body, "rate_hz", self.config.simulator.rate_hz)
        with self._lock:
            assert self._client is not None
            published = publish_request(self._client, self.config, scan, scan_x, scan_y, rate)
        target = (f"streamed to {len(published.request.routing)} NodeGroups" if published.request.routing
                  else "no NodeGroup registered: written to raw files")
        log.info("operator requested scan %d (%d x %d, %g Hz): %s", scan, scan_x, scan_y, rate, target)
        return f"scan {scan}: requested {scan_x} x {scan_y}, {target}"

    def submit_session(self, body: dict[str, Any]) -> str:
        """``sectorflow session submit``: renders the batch script and submits it; returns the job id line."""
        from sectorflow.operations.session_script import SessionRequest, render_script
        from sectorflow.operations.slurm import submit
        from sectorflow.security.session_keys import make_session_key_dir

        nodes = _integer(body, "nodes", 1, 100000) if body.get("nodes") not in (None, "") else None
        time_limit = str(body["time"]) if body.get("time") not in (None, "") else None
        with self._lock:
            log_dir = Path(self.config.dashboard.session_log_dir)
            request = SessionRequest.from_config(self.config, log_dir, nodes, time_limit, None)
            request.log_dir.mkdir(parents=True, exist_ok=True)
            if self.config.security.enabled:
                request = replace(request, key_dir=make_session_key_dir(self.config, request.log_dir))
            job_id = submit(render_script(request), request.log_dir)
        log.info("operator submitted session job %s", job_id)
        return f"submitted session job {job_id} ({request.slurm.nodes} node(s), {request.slurm.time})"

    def cancel_session(self, job_id: str) -> str:
        from sectorflow.operations.slurm import cancel

        with self._lock:
            cancel(job_id)
        log.info("operator cancelled session job %s", job_id)
        return f"cancelled session job {job_id}"


def _integer(body: dict[str, Any], key: str, low: int, high: int) -> int:
    value = body.get(key)
    try:
        number = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
        number = None
    if number is None or isinstance(value, bool) or not low <= number <= high:
        raise Refused(400, f"{key} = {value!r}: expected an integer from {low} to {high}")
    return number


def _number(body: dict[str, Any], key: str, default: float) -> float:
    value = body.get(key, default)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise Refused(400, f"{key} = {value!r}: expected a number of frames per second >= 0") from None
    if not number >= 0 or number == float("inf"):
        raise Refused(400, f"{key} = {value!r}: expected a number of frames per second >= 0")
    return number
