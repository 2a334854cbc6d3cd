"""e2e fixtures: a real Slurm cluster for the session tests (root, Debian's slurm-wlm + munge)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_available


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
