"""Fixtures every test shares; the helpers behind them live in support.py."""

from __future__ import annotations

import os
import signal
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from harness import deep_update, free_port_block, write_toml
from slurm_cluster import SlurmCluster, slurm_available
from support import LOOPBACK, Processes

from sectorflow.configs import DEFAULT_CONFIG, Config, load_config


def pytest_configure(config: pytest.Config) -> None:
    """The processes the tests start take Ctrl-C as from a terminal, also when the suite runs in the
    background: a non-interactive shell starts a background command (``make test &``, a CI runner's
    job) with SIGINT ignored, exec keeps an ignored signal ignored, and Python leaves it so. Then
    ``sectorflow acquire`` rightly ignored the SIGINT its test sends. A handler is reset at exec."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., tuple[Config, Path]]:
    """Build a config from configs/local.toml with free ports, tmp directories and overrides.

    ``make_config(detector={...}, receivers=[...], ...)`` returns ``(config, path)``; the file at
    ``path`` is what subprocesses get with ``--config``.
    """
    return config_maker(tmp_path)


@pytest.fixture(scope="module")
def make_module_config(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., tuple[Config, Path]]:
    """``make_config`` for a module's fixture: one stack's scan that several tests read."""
    return config_maker(tmp_path_factory.mktemp("config"))


def config_maker(tmp_path: Path) -> Callable[..., tuple[Config, Path]]:
    """What ``make_config`` gives, its files and directories under ``tmp_path``."""
    counter = iter(range(1000))

    def make(**overrides: Any) -> tuple[Config, Path]:
        data = tomllib.loads(DEFAULT_CONFIG.read_text())
        # One block for every listening port of the configuration: ports probed one by one can come
        # back the same (the dashboard once got the kvstore's).
        n_receivers = len(overrides.get("receivers", data["receivers"]))
        first = free_port_block(LOOPBACK, 3 + n_receivers + 1)
        # No durable records unless a test asks (kvstore={"log_dir": ...}): every test's server starts empty.
        data["kvstore"].update(port=first, heartbeat_ms=200, ttl_s=1.0, log_dir="")
        data["aggregator"]["base_port"] = first + 3
        data["producer"]["fallback_dir"] = str(tmp_path / "raw")
        data["nodegroup"]["output_dir"] = str(tmp_path / "counted")
        # The shipped configuration images a specimen (for the demo); tests ask for one when they want it.
        data.setdefault("simulator", {})["specimen"] = "none"
        data.setdefault("dashboard", {})["port"] = first + 3 + n_receivers
        deep_update(data, overrides)
        path = write_toml(data, tmp_path / f"config{next(counter)}.toml")
        return load_config(path), path

    return make


@pytest.fixture
def open_push() -> Iterator[Callable[[str], zmq.Socket]]:
    """Connects a PUSH socket to an endpoint (a test playing an aggregator's relay thread); every one
    is closed without lingering whatever happens."""
    context = zmq.Context()
    sockets: list[zmq.Socket] = []

    def connect(endpoint: str) -> zmq.Socket:
        sockets.append(context.socket(zmq.PUSH))
        sockets[-1].connect(endpoint)
        return sockets[-1]

    try:
        yield connect
    finally:
        for socket in sockets:
            socket.close(linger=0)
        context.term()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


@pytest.fixture
def local_config() -> Config:
    return load_config()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    if os.geteuid() != 0 or not slurm_available():
        pytest.fail("the Slurm tests need root and Debian's slurm-wlm and munge (make deps installs them)")
    cluster = SlurmCluster(Path(tmp_path_factory.mktemp("slurm")))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm_env(slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point this test's Slurm client commands (and its subprocesses) at the test cluster."""
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    return slurm.env
