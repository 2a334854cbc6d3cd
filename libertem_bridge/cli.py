"""``sectorflow libertem``: serve every scan's counted frames to LiberTEM-live until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
from typing import Any

from sectorflow.configs import Config
from sectorflow.kvstore import Client
from sectorflow.service import stop_on_signals

from .bridge import Bridge
from .server import AcquisitionServer, parse_listen
from .status import ROLE, SERVICE_LIBERTEM, StatusPublisher, client_fields, sent_fields, status_name

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add the ``libertem`` subcommand."""
    from sectorflow.cli import add_config_argument

    parser = subparsers.add_parser(
        "libertem", help="serve the counted frames to LiberTEM-live (its asi_tpx3 detector)",
        description="Read every NodeGroup's counted frames from the live stream (as 'sectorflow view' does, with "
        "the viewer key when [security] is on) and serve each scan as one acquisition of LiberTEM-live's asi_tpx3 "
        "detector (sparse CSR over TCP, libertem_bridge/SPEC.md) to each client connected (up to 4; with [security] "
        "on, only this account's processes on this host): "
        "ctx.make_connection('asi_tpx3').open(data_host=HOST, data_port=PORT). Positions go in order; one that "
        "never came goes empty, counted. The bridge never slows the NodeGroups: a slow client, or one that reads "
        "nothing for 10 s, is disconnected. "
        "Prints 'listening on HOST:PORT', runs until SIGTERM or Ctrl-C and then prints what it served.",
    )
    add_config_argument(parser)
    parser.add_argument("--listen", metavar="HOST:PORT", default=None,
                        help="where LiberTEM connects (default: [libertem] listen, 127.0.0.1:8283; port 0: any free)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="listen on a non-loopback address (the stream has no authentication: anyone who "
                        "connects reads every scan; refused with [security] on)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, config: Config) -> int:
    secured = config.security.enabled
    host, port = parse_listen(args.listen or config.libertem.listen, args.allow_remote, secured)
    name = status_name(config)  # before listening: a host with no viewer key fails in one line
    # With [security] on, a client is admitted by the account that owns its socket: LiberTEM's
    # asi_tpx3 client presents no key (libertem_bridge/SPEC.md, "Clients").
    server = AcquisitionServer(host, port, config.libertem.queue_mib << 20, max_clients=config.libertem.max_clients,
                               read_deadline_s=config.libertem.read_deadline_s,
                               account=os.geteuid() if secured else None)
    try:
        with Client.from_config(config, subtree=f"status/{SERVICE_LIBERTEM}/{name}", name="libertem",
                                role=ROLE) as client:
            bridge = Bridge(config, server, publisher=StatusPublisher(config, client))
            shown = f"[{server.address[0]}]" if ":" in server.address[0] else server.address[0]
            print(f"listening on {shown}:{server.address[1]}", flush=True)
            with stop_on_signals(log) as stop:
                bridge.run(stop)
    finally:
        server.close()
    # Totals over the bridge's life; the last scan's fields are the status's (libertem_bridge/status.py).
    counters = {field: value for field, value in dataclasses.asdict(bridge.counters).items()
                if not field.startswith("last_scan")}
    counters.update(sent_fields(bridge.counters, server))
    counters.update(client_fields(server))
    print("served: " + ", ".join(f"{name} {value}" for name, value in counters.items()), flush=True)
    return 0
