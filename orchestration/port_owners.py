"""The TCP ports a local stack will listen on, and who holds them already.

``sectorflow up`` asks before it starts anything: a second stack on the same ports used to "start"
with its kvstore, aggregator and dashboard dead of "Address already in use" while its producers and
NodeGroups joined the first stack's kvstore (and its scans lost sectors to the duplicates).
"""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from sectorflow.configs import Config

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


@dataclass(frozen=True)
class StackPort:
    """A port a service of the stack binds: which service, on which interface, and the setting."""

    service: str
    host: str
    port: int
    setting: str


def stack_ports(config: Config, dashboard: bool) -> list[StackPort]:
    """The fixed ports of ``config``'s local stack (NodeGroups and the live stream bind ephemeral ones)."""
    kv = config.kvstore
    if len(kv.servers) == 2:
        # The pair: each server binds P .. P + 3 of its own entry (P + 3: the peer link).
        ports = [StackPort(f"kvstore {pair}", kv.bind_host, int(server.rpartition(":")[2]) + offset, "[kvstore] servers")
                 for pair, server in zip(("primary", "backup"), kv.servers) for offset in range(4)]
    else:
        ports = [StackPort("kvstore", kv.bind_host, kv.port + offset, "[kvstore] port") for offset in range(3)]
    agg = config.aggregator
    ports += [StackPort("aggregator", agg.bind_host, agg.base_port + relay, "[aggregator] base_port")
              for relay in range(len(agg.hosts) * config.n_receivers)]
    if dashboard:
        ports.append(StackPort("dashboard", config.dashboard.bind_host, config.dashboard.port, "[dashboard] port"))
    return ports


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the services bind (ZeroMQ and uvicorn set SO_REUSEADDR): a port in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def owner(port: int) -> str:
    """``pid N (command line)`` of a process listening on ``port``, or "another process" if unseen."""
    inodes = _listening_inodes(port)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            sockets = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
            if any(f"socket:[{inode}]" in sockets for inode in inodes):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                return f"pid {proc.name} ({' '.join(part.decode(errors='replace') for part in argv if part)})"
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return "another process"


def ports_held(config: Config, dashboard: bool) -> list[str]:
    """One line per port of the stack that something already listens on, naming what holds it."""
    return [f"port {p.port} ({p.service}, {p.setting}) on {p.host} is held by {owner(p.port)}"
            for p in stack_ports(config, dashboard) if not _bindable(p.host, p.port)]
