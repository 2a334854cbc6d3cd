"""The beamline's services on the hosts of a netlab Topology, from one configuration file
(configs/netlab.toml or a variant of it).

kvstore and aggregator on ``agg`` (member i of an aggregation tier on ``AGGREGATOR_ROLES[i]``: agg,
agg2, ...), producer r on ``recv<r+1>``, one NodeGroup job (``mpiexec -n 1``)
per compute node; every process started by one Supervisor (its PID is the program's: see
``Topology.command``), stopped by ``stop`` or when the namespaces go. The caller sits outside the
namespaces: what needs the kvstore (readiness, ``acquire --wait``) runs on ``agg``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from sectorflow.configs import Config, load_config
from sectorflow.errors import SectorflowError
from sectorflow.consumer.nodegroup.launch import mpiexec_environment
from sectorflow.orchestration.stack import stack_services
from sectorflow.orchestration.supervisor import ServiceSpec, Supervisor
from sectorflow.waiting import wait_until

from ..commands import acquire_command
from ..toml_files import deep_update, write_toml
from . import await_stack, scan_records
from .topology import AGGREGATOR_ROLES, RECEIVER_ROLES, Topology

REPO = Path(__file__).resolve().parents[2]
NETLAB_CONFIG = REPO / "configs" / "netlab.toml"
NETNS_RSH = Path(__file__).resolve().parent / "netns_rsh"
READY_S = 120.0
SCAN_S = 300.0


def netlab_config(workdir: Path, **overrides: Any) -> tuple[Config, Path]:
    """configs/netlab.toml with its directories under ``workdir`` and ``overrides`` (tables of keys)."""
    data = tomllib.loads(NETLAB_CONFIG.read_text())
    data["producer"]["fallback_dir"] = str(workdir / "raw")
    data["nodegroup"]["output_dir"] = str(workdir / "counted")
    deep_update(data, overrides)
    path = write_toml(data, workdir / "netlab.toml")
    return load_config(path), path


def tier_overrides(net: Topology) -> dict[str, Any]:
    """The ``[aggregator]`` keys of a tier on ``net``'s aggregator hosts (member i on the i-th, each
    binding its own host's address by 0.0.0.0 in its namespace); {} for one aggregator host."""
    if len(net.aggregator_roles) == 1:
        return {}
    return {"tier": [net.hosts[role].name for role in net.aggregator_roles], "bind_host": "0.0.0.0"}


def service_role(name: str) -> str:
    """The host ``sectorflow up``'s service ``name`` runs on: producer-r on recv<r+1>, aggregator-i
    (a tier's member i) on AGGREGATOR_ROLES[i], the rest on agg."""
    if name.startswith("producer-"):
        return RECEIVER_ROLES[int(name.removeprefix("producer-"))]
    member = name.removeprefix("aggregator-")
    return AGGREGATOR_ROLES[int(member)] if member.isdigit() else "agg"


class NetlabStack:
    """The services of one configuration on the hosts of ``net``, under ``supervisor``."""

    def __init__(self, net: Topology, config: Config, path: Path, supervisor: Supervisor) -> None:
        self.net, self.config, self.path, self.supervisor = net, config, path, supervisor

    def _start(self, role: str, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        return self.supervisor.start(ServiceSpec(name, tuple(self.net.command(role, argv))), env)

    def start(self, hosts: dict[str, str] | None = None) -> None:
        """The services `sectorflow up` runs (orchestration's list), each on its host (``service_role``),
        or the role ``hosts`` names for a service (the backup of a kvstore pair on another host); waits
        until all announced."""
        for spec in stack_services(self.config, 0, with_nodegroups=False):
            self._start((hosts or {}).get(spec.name, service_role(spec.name)), spec.name, list(spec.argv))
        self.await_ready(0)

    def start_service(self, role: str, name: str, *args: str) -> subprocess.Popen:
        """``sectorflow <args>`` with this configuration, on host ``role``, as service ``name`` (one the
        stack's own list does not place there: a standby aggregator on another host)."""
        return self._start(role, name, [sys.executable, "-m", "sectorflow", *args, "--config", str(self.path)])

    def status(self) -> str:
        """What ``sectorflow status`` prints on agg (the kvstore is reached from the namespaces only)."""
        argv = [sys.executable, "-m", "sectorflow", "status", "--config", str(self.path)]
        return subprocess.run(self.net.command("agg", argv), capture_output=True, text=True, timeout=60).stdout

    def start_nodegroups(self, roles: tuple[str, ...] = ("compute1", "compute2"), *extra: str) -> None:
        """One NodeGroup job, a rank on each compute node of ``roles``, as a session's job spans its
        nodes (``extra``: more nodegroup options); waits until every NodeGroup has registered.

        mpiexec runs on the first node; its launcher reaches the others through ``netns_rsh``
        (hydra's ssh launcher, with ``ip netns exec`` for ssh); the ranks talk TCP between the nodes.
        """
        mpiexec = shutil.which("mpiexec")
        if mpiexec is None:
            raise SectorflowError("mpiexec not found on the PATH: install MPICH (make deps) to run NodeGroups")
        hosts = [self.net.hosts[role] for role in roles]
        argv = [mpiexec, "-launcher", "ssh", "-launcher-exec", str(NETNS_RSH), "-hosts",
                ",".join(host.name for host in hosts), "-ppn", "1", "-n", str(len(hosts)),
                sys.executable, "-m", "sectorflow", "nodegroup", "--config", str(self.path), *extra]
        env = {"NETLAB_NAMESPACES": " ".join(f"{host.name}={host.namespace}" for host in hosts),
               **dict(mpiexec_environment(self.config))}
        self._start(roles[0], "nodegroups", argv, env)
        self.await_ready(len(roles) * self.config.nodegroup.groups_per_rank)

    def _await(self, *args: str, timeout_s: float, services_live: bool = False) -> None:
        """Runs await_stack on agg; with ``services_live``, a service that exits meanwhile ends the
        wait at once with its log (not at the deadline)."""
        argv = [sys.executable, await_stack.__file__, args[0], str(self.path), *args[1:], str(timeout_s)]
        with subprocess.Popen(self.net.command("agg", argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) as waiter:
            try:
                wait_until(lambda: waiter.poll() is not None, timeout_s + 30, f"await_stack {args[0]}", 0.1,
                           on_poll=(lambda _s: self.supervisor.check()) if services_live else None)
            except SectorflowError:  # a service exited, or the wait itself timed out
                waiter.kill()
                raise
            error = waiter.stderr.read() if waiter.stderr is not None else ""
        if waiter.returncode != 0:
            raise SectorflowError(f"{error.strip()[-2000:]}\n{self.logs()}")

    def await_ready(self, nodegroups: int) -> None:
        """Block until the kvstore shows every producer thread, aggregator thread and ``nodegroups``
        NodeGroups; SectorflowError with what is missing and the services' logs otherwise, at once
        if a service exits meanwhile."""
        self._await("ready", str(nodegroups), timeout_s=READY_S, services_live=True)

    def await_members(self, members: int) -> None:
        """Block until exactly ``members`` members of the aggregation tier are up (what acquire reads
        when it fixes a scan's tier list)."""
        self._await("members", str(members), timeout_s=READY_S)

    def relayed(self, scan: int) -> dict[int, dict[str, Any]]:
        """``scan``'s relay records by relay thread j (member j // R), read on agg: forwarded and lost
        sectors (summed over NodeGroups), complete, dead NodeGroups; and the scan's tier list (key -1)."""
        argv = [sys.executable, scan_records.__file__, str(self.path), str(scan)]
        done = subprocess.run(self.net.command("agg", argv), capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise SectorflowError(f"scan_records {scan}: {done.stderr.strip()[-2000:]}")
        return {int(thread): record for thread, record in json.loads(done.stdout).items()}

    def await_sent(self, scan: int, sectors: int) -> None:
        """Block until the producers have sent ``sectors`` sectors of ``scan``: a fault then hits mid-scan."""
        self._await("sent", str(scan), str(sectors), timeout_s=SCAN_S)

    def acquire(self, scan: int, shape: str, rate_hz: float = 0.0, *extra: str) -> subprocess.Popen[str]:
        """``sectorflow acquire --wait`` on agg, in the background; its output ends with the scan's account."""
        argv = acquire_command(self.path, scan, shape, rate_hz, SCAN_S, *extra)
        return subprocess.Popen(self.net.command("agg", argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)

    def logs(self, chars: int = 1500) -> str:
        """The end of every service's log, for an error message."""
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}"
                         for path in sorted(self.supervisor.run_dir.glob("*.log")))

    def stop(self) -> None:
        self.supervisor.stop_all()
