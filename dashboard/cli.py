"""``sectorflow dashboard``: serve the web dashboard and /metrics until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import socket
from typing import Any

from sectorflow.configs import Config, ConfigError
from sectorflow.configs.loader import check_binds, is_loopback
from sectorflow.errors import SectorflowError, require

log = logging.getLogger(__name__)

# From SIGTERM to closing the event streams still open (they never end by themselves).
GRACEFUL_S = 2.0


def register(subparsers: Any) -> None:
    """Add the ``dashboard`` subcommand."""
    from sectorflow.cli import add_config_argument

    parser = subparsers.add_parser(
        "dashboard", help="serve the web dashboard and Prometheus /metrics",
        description="Follow the kvstore and serve a web page of the pipeline: every service and its state, "
        "streaming sessions with their time left, the scan in progress with its progress per receiver, rates, "
        "queue depths and refused messages, recent scans with outcome and file, the latest scan's images, "
        "alerts. Live updates by server-sent events (/events); Prometheus metrics at /metrics. Read-only "
        "unless [dashboard] control_token_file is set. Listens on [dashboard] bind_host:port (loopback by "
        "default); with [security] on, reads need a loopback client or the token of [dashboard] view_token_file, "
        "and a bind beyond loopback needs ssl_certfile and ssl_keyfile (HTTPS). Exits 0 on SIGTERM or Ctrl-C, "
        "non-zero with one line if the port is taken or the configuration is refused.",
    )
    add_config_argument(parser)
    parser.add_argument("--bind", metavar="HOST:PORT", default=None,
                        help="where to listen (default: [dashboard] bind_host and port)")
    parser.set_defaults(run=run)


def check_tls(config: Config) -> None:
    """With [security] on, a dashboard beyond loopback speaks only TLS: refuse to start without a
    certificate rather than serve the viewer's token and the beamline's state in the clear."""
    d = config.dashboard
    if bool(d.ssl_certfile) != bool(d.ssl_keyfile):
        raise ConfigError(f"{config.source}: set both 'dashboard.ssl_certfile' and 'dashboard.ssl_keyfile', or neither")
    if config.security.enabled and not is_loopback(d.bind_host) and not d.ssl_certfile:
        raise ConfigError(f"{config.source}: 'dashboard.bind_host' = {d.bind_host!r} listens beyond this machine "
                          "with [security] on but no TLS certificate: set [dashboard] ssl_certfile and ssl_keyfile "
                          "(PEM), or bind 127.0.0.1")


def _protocol(idle_timeout_s: int) -> type:
    """uvicorn's own h11 protocol, but a connection that has not sent a whole request within
    ``idle_timeout_s`` of opening is closed (uvicorn's keep-alive timeout covers only the wait
    between requests, so a connection that never sends would be held forever)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class IdleClosingH11(H11Protocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._first_request_timer = self.loop.call_later(idle_timeout_s, self._close_if_no_request)

        def _close_if_no_request(self) -> None:
            if self.cycle is None and not self.transport.is_closing():
                self.timeout_keep_alive_handler()

        def connection_lost(self, exc: Exception | None) -> None:
            self._first_request_timer.cancel()
            super().connection_lost(exc)

    return IdleClosingH11


def with_bind(config: Config, bind: str | None) -> Config:
    """``config`` with ``--bind HOST:PORT`` applied and the loopback rule checked again."""
    if bind is None:
        return config
    host, sep, port_text = bind.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ConfigError(f"--bind {bind!r}: expected HOST:PORT, e.g. 127.0.0.1:8750")
    moved = dataclasses.replace(config, dashboard=dataclasses.replace(config.dashboard, bind_host=host.strip("[]"),
                                                                      port=int(port_text)))
    check_binds(moved, f"--bind {bind!r}")
    return moved


def run(args: argparse.Namespace, config: Config) -> int:
    uvicorn = require("uvicorn", "dashboard", "to serve the dashboard")
    require("starlette", "dashboard", "to serve the dashboard")
    require("prometheus_client", "dashboard", "for the dashboard's /metrics")
    from .app import create_app

    config = with_bind(config, args.bind)
    check_tls(config)
    app = create_app(config)
    listener = _listen(config.dashboard.bind_host, config.dashboard.port)
    d = config.dashboard
    tls = {"ssl_certfile": d.ssl_certfile, "ssl_keyfile": d.ssl_keyfile} if d.ssl_certfile else {}
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on",
                                           timeout_graceful_shutdown=GRACEFUL_S, http=_protocol(d.idle_timeout_s),
                                           timeout_keep_alive=d.idle_timeout_s, **tls))
    log.info("dashboard at %s (metrics at %smetrics), following the kvstore at %s", config.dashboard.url(),
             config.dashboard.url(), config.kvstore.address)
    # uvicorn stops on SIGTERM/SIGINT and then raises the signal again under the handler it found:
    # this one, so that a stop ends in exit code 0, as the other services' do.
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, lambda number, _frame: log.info("received %s: stopped", signal.Signals(number).name))
    with listener:
        server.run(sockets=[listener])
    if not server.started:
        raise SectorflowError("the dashboard did not start (see the log above)")
    log.info("dashboard stopped")
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """The bound listening socket: a taken port fails here, in one line naming the address."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        raise SectorflowError(f"cannot listen on {host}:{port}: {error.strerror}; set [dashboard] port or --bind")\
            from None
    listener.listen(128)
    return listener
