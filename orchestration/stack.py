"""The local stack of a configuration: which services ``sectorflow up`` and the demo run, in order.

kvstore first (everyone registers there; both servers of a pair ``[kvstore] servers`` lists), then the aggregator, the NodeGroups under ``mpiexec``,
one producer daemon per receiver and, for ``up`` and the demo, the web dashboard (``[dashboard]``).
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path

from collections.abc import Callable

from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.waiting import WaitTimeout, wait_until

from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup.launch import mpiexec_environment
from sectorflow.protocol import SERVICE_LIBERTEM

from .port_owners import ports_held
from .readiness import Expected, wait_ready
from .supervisor import STOP_TIMEOUT_S, ServiceSpec, Supervisor, load_running, stop_services

log = logging.getLogger(__name__)

DASHBOARD = "dashboard"
LIBERTEM = "libertem"
# The modules of the `dashboard` extra: without them `up` starts no dashboard and says why.
DASHBOARD_MODULES = ("starlette", "uvicorn", "prometheus_client")
DASHBOARD_POLL_S = 0.2  # how often `up` asks the starting dashboard whether it serves


def _sectorflow(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "sectorflow", *args)


def stack_services(config: Config, ranks: int, output_dir: Path | None = None,
                   with_nodegroups: bool = True, counting: bool = True) -> list[ServiceSpec]:
    """The services of ``config``'s pipeline on this machine.

    ``ranks`` MPI ranks of NodeGroups are started with ``mpiexec`` (none if ``with_nodegroups`` is
    false, e.g. when a Slurm session provides them); without ``counting`` they only assemble
    (benchmarks). Raises SectorflowError if mpiexec is missing.
    """
    path = str(Path(config.source).resolve())
    if len(config.kvstore.servers) == 2:
        # The pair (kvstore/SPEC.md, "The pair"): whichever starts first, the primary ends active.
        services = [ServiceSpec(f"kvstore-{pair}", _sectorflow("kvstore", "--config", path, "--pair", pair))
                    for pair in ("primary", "backup")]
    else:
        services = [ServiceSpec("kvstore", _sectorflow("kvstore", "--config", path))]
    services.append(ServiceSpec("aggregator", _sectorflow("aggregator", "--config", path)))
    # The rest of an aggregation tier ([aggregator] tier): member i relays the frames f % k = i.
    for member in range(1, len(config.aggregator.hosts)):
        services.append(ServiceSpec(f"aggregator-{member}",
                                    _sectorflow("aggregator", "--config", path, "--member", str(member))))
    if standby_is_local(config):
        services.append(ServiceSpec(AGGREGATOR_STANDBY, _sectorflow("aggregator", "--config", path, "--standby")))
    if with_nodegroups:
        mpiexec = shutil.which("mpiexec")
        if mpiexec is None:
            raise SectorflowError("mpiexec not found on the PATH: install MPICH (make deps) to run NodeGroups")
        nodegroup = ["nodegroup", "--config", path]
        if output_dir is not None:
            nodegroup += ["--output", str(output_dir.resolve())]
        if not counting:
            nodegroup.append("--no-counting")
        services.append(ServiceSpec("nodegroups", (mpiexec, "-n", str(ranks), *_sectorflow(*nodegroup)),
                                    mpiexec_environment(config)))
    for receiver in range(config.n_receivers):
        services.append(ServiceSpec(f"producer-{receiver}",
                                    _sectorflow("producer", "--config", path, "--receiver", str(receiver))))
    return services


AGGREGATOR_STANDBY = "aggregator-standby"


def standby_is_local(config: Config) -> bool:
    """Whether ``config``'s standby aggregator runs on this machine (``up`` starts it then): its
    standby_host is a loopback address or this host's name."""
    host = config.aggregator.standby_host
    return bool(host) and (host.startswith("127.") or host in ("localhost", socket.gethostname()))


def dashboard_missing() -> list[str]:
    """The modules of the ``dashboard`` extra that are not installed."""
    return [name for name in DASHBOARD_MODULES if importlib.util.find_spec(name) is None]


def dashboard_service(config: Config) -> ServiceSpec:
    """The web dashboard of ``config`` (``sectorflow dashboard``)."""
    return ServiceSpec(DASHBOARD, _sectorflow(DASHBOARD, "--config", str(Path(config.source).resolve())))


def dashboard_url(config: Config) -> str:
    """Where the page of ``config``'s dashboard is."""
    return config.dashboard.url()


def _dashboard_serving(config: Config) -> bool:
    try:
        with urllib.request.urlopen(dashboard_url(config) + "healthz", timeout=1.0) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


def start_stack(config: Config, run_dir: Path, ranks: int, output_dir: Path | None, with_nodegroups: bool,
                ready_timeout_s: float, counting: bool = True, dashboard: bool = False,
                libertem: bool = False) -> Supervisor:
    """Start every service of the stack and wait until it is ready; on failure stop what started.

    With ``dashboard`` (``up`` and the demo, when ``[dashboard] with_stack``), the web dashboard too,
    ready once its page answers; without the ``dashboard`` extra installed it is left out with a warning.
    With ``libertem`` (``up``, when ``[libertem] with_stack``), the LiberTEM-live bridge, ready once it
    published its status (it listens by then).
    """
    if any(Path(f"/proc/{service.pid}").exists() for service in load_running(run_dir)):
        raise SectorflowError(f"{run_dir} already has running services: run 'sectorflow down --run-dir {run_dir}' first")
    held = ports_held(config, dashboard and not dashboard_missing())
    if held:
        raise SectorflowError(f"not starting: {held[0]}" + (f" (and {len(held) - 1} more ports)" if len(held) > 1 else "")
                              + ": another stack runs on these ports; stop it ('sectorflow down --run-dir DIR' of that "
                              "stack) or give this one other ports in its configuration")
    supervisor = Supervisor(run_dir)
    try:
        services = stack_services(config, ranks, output_dir, with_nodegroups=with_nodegroups, counting=counting)
        for spec in services:
            supervisor.start(spec)
        groups = ranks * config.nodegroup.groups_per_rank if with_nodegroups else 0
        with Client.from_config(config, name="up") as client:
            wait_ready(client, Expected.of(config, groups), ready_timeout_s, supervisor.check)
        missing = dashboard_missing() if dashboard else []
        if missing:
            log.warning("no dashboard: %s not installed (pip install '.[dashboard]' in the checkout)", ", ".join(missing))
        elif dashboard:
            # Once the stack is ready: the dashboard only observes it, and nothing of the stack waits for it.
            supervisor.start(dashboard_service(config))
            wait_serving(config, ready_timeout_s, supervisor.check)
        if libertem:
            supervisor.start(libertem_service(config))
            wait_bridge(config, ready_timeout_s, supervisor.check)
        # Ready, and every service still running: one that died at start is a failed start, whatever answered.
        supervisor.check()
    except BaseException:
        supervisor.stop_all()
        raise
    return supervisor


def restart_service(config: Config, run_dir: Path, name: str, ranks: int, output_dir: Path | None,
                    ready_timeout_s: float, grace_s: float = STOP_TIMEOUT_S) -> int:
    """Start the service ``name`` of the stack running in ``run_dir`` again (``up --only``): stopped
    first if it still runs, started as ``up`` starts it, the stack then waited for as ``up`` does. The
    other services run on, recorded as before. Returns the new process's pid.

    Raises SectorflowError if nothing runs in ``run_dir`` or ``name`` is no service of the stack.
    """
    recorded = load_running(run_dir)
    if not any(Path(f"/proc/{service.pid}").exists() for service in recorded if service.name != name):
        raise SectorflowError(f"no stack runs in {run_dir}: start it with 'sectorflow up'")
    with_nodegroups = name == "nodegroups" or any(service.name == "nodegroups" for service in recorded)
    specs = {spec.name: spec for spec in stack_services(config, ranks, output_dir, with_nodegroups=with_nodegroups)}
    specs[DASHBOARD] = dashboard_service(config)
    specs[LIBERTEM] = libertem_service(config)
    if name not in specs:
        raise SectorflowError(f"--only {name}: no such service in the stack of {config.source}; one of "
                              f"{', '.join(specs)}")
    stop_services([service for service in recorded if service.name == name], grace_s)
    supervisor = Supervisor(run_dir, recorded=[service for service in recorded if service.name != name])
    process = supervisor.start(specs[name])
    try:
        if name == DASHBOARD:
            wait_serving(config, ready_timeout_s, supervisor.check)
        elif name == LIBERTEM:
            wait_bridge(config, ready_timeout_s, supervisor.check)
        else:
            groups = ranks * config.nodegroup.groups_per_rank if with_nodegroups else 0
            with Client.from_config(config, name="up") as client:
                wait_ready(client, Expected.of(config, groups), ready_timeout_s, supervisor.check)
        supervisor.check()
    except BaseException:
        supervisor.stop_all()
        raise
    return process.pid


def libertem_service(config: Config) -> ServiceSpec:
    """The LiberTEM-live bridge of ``config`` (``sectorflow libertem``), on ``[libertem] listen``."""
    return ServiceSpec(LIBERTEM, _sectorflow(LIBERTEM, "--config", str(Path(config.source).resolve())))


def wait_bridge(config: Config, timeout_s: float, check: Callable[[], None]) -> None:
    """Block until a LiberTEM bridge has published its status (it listens before it publishes); ``check``
    raises if a service died meanwhile (a bridge whose port is taken exits, its log says why)."""
    with Client.from_config(config, name="up") as client:
        def published() -> bool:
            check()
            return bool(client.statuses(SERVICE_LIBERTEM))

        try:
            wait_until(published, timeout_s, "the LiberTEM bridge", DASHBOARD_POLL_S)
        except WaitTimeout:
            raise SectorflowError(f"the LiberTEM bridge published no status within {timeout_s:.0f} s") from None


def wait_serving(config: Config, timeout_s: float, check: Callable[[], None]) -> None:
    """Block until the dashboard answers; ``check`` raises if a service died meanwhile."""
    def serving() -> bool:
        check()
        return _dashboard_serving(config)

    try:
        wait_until(serving, timeout_s, "the dashboard", DASHBOARD_POLL_S)
    except WaitTimeout:
        raise SectorflowError(f"the dashboard did not answer at {dashboard_url(config)} within {timeout_s:.0f} s") \
            from None
