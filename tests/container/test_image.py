"""The image `make image` builds runs the stack: a scan through services started in a container,
and through every service in a container of its own (as a facility deploys them), equals the scan
the venv's stack writes (docs/deployment.md "Running from the image").

Containers get the host's network and the test's directory at the same path, so the configuration
written by make_config serves every stack unchanged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support import stack_up, wait_until

from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration.readiness import Expected, missing
from sectorflow.orchestration.stack import stack_services

pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.mpi]

ROOT = Path(__file__).resolve().parents[2]
PODMAN = str(ROOT / "image" / "podman")
IMAGE = "localhost/sectorflow:latest"
IMAGE_PYTHON = "/opt/sectorflow/bin/python"  # image/Containerfile's venv
SCAN, SHAPE = 1, "8x8"


@pytest.fixture(scope="module")
def image() -> str:
    built = subprocess.run(["make", "-s", "image", f"IMAGE={IMAGE}"], cwd=ROOT, capture_output=True, text=True,
                           timeout=3600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return IMAGE


@pytest.fixture
def container(image: str, tmp_path: Path) -> Iterator[list[str]]:
    """A container of the image that idles; yields the command prefix that runs a command in it."""
    name = f"sectorflow-test-{os.getpid()}"
    started = subprocess.run([PODMAN, "run", "-d", "--rm", "--name", name, "--network", "host",
                              "-v", f"{tmp_path}:{tmp_path}", "--entrypoint", "sleep", image, "infinity"],
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    try:
        yield [PODMAN, "exec", name, "sectorflow"]
    finally:
        subprocess.run([PODMAN, "rm", "-f", "-t", "0", name], capture_output=True, timeout=120)


def test_the_image_runs_sectorflow_and_its_counting_self_check(container: list[str]) -> None:
    helped = subprocess.run([*container, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "acquire" in helped.stdout
    # mpi4py's wheel on the image's Debian MPICH, through the library the Makefile links.
    mpi = subprocess.run([*container[:-1], "python3", "-c",
                          "from mpi4py import MPI; print(MPI.Get_library_version().split()[0])"],
                         capture_output=True, text=True, timeout=60)
    assert (mpi.returncode, mpi.stdout.strip()) == (0, "MPICH"), mpi.stderr


def _acquire(command: list[str], path: Path) -> None:
    acquired = subprocess.run([*command, "acquire", "--config", str(path), "--scan-number", str(SCAN),
                               "--scan-shape", SHAPE, "--wait", "--timeout", "120"],
                              capture_output=True, text=True, timeout=300)
    assert acquired.returncode == 0, acquired.stdout + acquired.stderr


def venv_scan(config, path: Path, tmp_path: Path) -> Path:
    """Scan SCAN through the venv's stack; returns its file."""
    out = tmp_path / "venv-h5"
    with stack_up(config, path, tmp_path / "venv-run", out):
        _acquire([sys.executable, "-m", "sectorflow"], path)
        wait_until(lambda: (out / scan_file_name(SCAN)).exists(), 60, "the venv stack's file")
    return out / scan_file_name(SCAN)


def assert_same_scan(ours_path: Path, theirs_path: Path) -> None:
    ours, theirs = read_counted_scan(ours_path), read_counted_scan(theirs_path)
    assert theirs.scan_shape == ours.scan_shape == (8, 8)
    assert theirs.metadata["scan"]["frames_complete"] == 64
    assert len(theirs.events) == len(ours.events)
    for position, (a, b) in enumerate(zip(ours.events, theirs.events)):
        assert np.array_equal(np.sort(a), np.sort(b)), f"position {position}"
    assert sorted(theirs.images) == sorted(ours.images)
    for name, image in ours.images.items():
        assert np.array_equal(image, theirs.images[name]), name


def test_a_scan_through_the_images_stack_equals_the_venvs(make_config, container: list[str],
                                                          tmp_path: Path) -> None:
    config, path = make_config()
    ours = venv_scan(config, path, tmp_path)
    image_out = tmp_path / "image-h5"
    up = subprocess.run([*container, "up", "--config", str(path), "--run-dir", str(tmp_path / "image-run"),
                         "--output", str(image_out)], capture_output=True, text=True, timeout=300)
    try:
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-3000:]
        _acquire(container, path)
        wait_until(lambda: (image_out / scan_file_name(SCAN)).exists(), 60, "the image stack's file")
    finally:
        down = subprocess.run([*container, "down", "--config", str(path), "--run-dir", str(tmp_path / "image-run")],
                              capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stderr
    assert_same_scan(ours, image_out / scan_file_name(SCAN))
    # The image has the plot extra: view draws the file's images as a PNG (it once had no
    # matplotlib).
    png = tmp_path / "scan.png"
    viewed = subprocess.run([*container, "view", str(image_out / scan_file_name(SCAN)), "--png", str(png)],
                            capture_output=True, text=True, timeout=120)
    assert viewed.returncode == 0, viewed.stdout[-2000:] + viewed.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("ranks", ["one container", "a container each"])
def test_every_service_in_a_container_of_its_own_scans_as_the_venvs_stack(make_config, image: str, tmp_path: Path,
                                                                          ranks: str) -> None:
    """kvstore, aggregator, each producer and the NodeGroup job in containers of their own, with the
    commands `sectorflow up` runs; the job's two ranks in one container under the image's mpiexec,
    or each in its own under the host's (image/mpi-rank). Acquired from the host."""
    config, path = make_config()
    ours = venv_scan(config, path, tmp_path)
    out = tmp_path / "containers-h5"
    label = f"sectorflow-test={os.getpid()}"
    mount = ["--label", label, "-v", f"{tmp_path}:{tmp_path}"]  # image/mpi-rank adds the host's network
    job = None
    try:
        for spec in stack_services(config, 2, out, with_nodegroups=True):
            argv = [IMAGE_PYTHON if word == sys.executable else word for word in spec.argv]
            if spec.name == "nodegroups" and ranks == "a container each":
                mpiexec, sectorflow = argv[:argv.index(IMAGE_PYTHON)], argv[argv.index("sectorflow") + 1:]
                job = subprocess.Popen([*mpiexec, str(ROOT / "image" / "mpi-rank"), *mount, image, *sectorflow],
                                       env={**os.environ, "PODMAN": PODMAN}, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
                continue
            started = subprocess.run([PODMAN, "run", "-d", "--rm", "--network", "host", *mount, "--entrypoint", argv[0],
                                      image, *argv[1:]], capture_output=True, text=True, timeout=120)
            assert started.returncode == 0, started.stderr
        with Client.from_config(config, name="test") as client:
            assert client.wait_synced(60)
            # What `up` waits for: a producer that comes up after the request was published does
            # not take it (it was seen in CI: one producer's container started late).
            wait_until(lambda: not missing(client, Expected.of(config, 2)), 120, "every service of the containers")
        _acquire([sys.executable, "-m", "sectorflow"], path)
        wait_until(lambda: (out / scan_file_name(SCAN)).exists(), 60, "the containers' file")
        if job is not None:
            # Hydra's proxy killed outright, beyond any signal handler: the ranks, outside its process
            # group in their containers, see their PMI connection hang up and leave by themselves.
            proxy = int(Path(f"/proc/{job.pid}/task/{job.pid}/children").read_text().split()[0])
            os.kill(proxy, signal.SIGKILL)
            with Client.from_config(config, name="test") as client:
                assert client.wait_synced(60)
                wait_until(lambda: not client.nodegroups(), 60, "the ranks' NodeGroups to leave the kvstore")
            wait_until(lambda: not containers(label, "sectorflow-rank-"), 60, "the rank containers to end")
    finally:
        for name in containers(label):
            print(name, subprocess.run([PODMAN, "logs", "--tail", "20", name], capture_output=True, text=True,
                                       timeout=60).stderr)  # shown by pytest when the test fails
        if job is not None and job.poll() is None:
            job.kill()
        if job is not None:
            print(job.communicate(timeout=120)[0][-3000:])
        if names := containers(label):
            subprocess.run([PODMAN, "rm", "-f", "-t", "10", *names], capture_output=True, timeout=300)
    assert_same_scan(ours, out / scan_file_name(SCAN))


def containers(label: str, prefix: str = "") -> list[str]:
    """The names of the containers (running or not) labelled ``label`` that start with ``prefix``."""
    listed = subprocess.run([PODMAN, "ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}"],
                            capture_output=True, text=True, timeout=60)
    return [name for name in listed.stdout.split() if name.startswith(prefix)]


@pytest.mark.slurm
def test_a_slurm_session_with_the_image_runs_each_rank_in_a_container_of_its_own(slurm_env, make_config, image: str,
                                                                                  tmp_path: Path) -> None:
    """`sectorflow session submit` with [slurm] image on the real Slurm of the tests: the job's mpiexec
    runs each rank through image/mpi-rank; a scan through them is counted; scancel ends the containers."""
    config, path = make_config(slurm={"image": image, "podman": PODMAN, "tasks_per_node": 2})
    out, logs = tmp_path / "session-h5", tmp_path / "logs"
    # Podman's state outlives a machine's test runs: a rank container an earlier run left is not this one's.
    earlier = set(rank_containers())
    with stack_up(config, path, tmp_path / "run", tmp_path / "unused-h5", nodegroups=False) as client:
        submitted = subprocess.run([sys.executable, "-m", "sectorflow", "session", "submit", "--config", str(path),
                                    "--time", "00:10:00", "--log-dir", str(logs), "--output", str(out)],
                                   capture_output=True, text=True, env=slurm_env, timeout=60)
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.split()[3]
        try:
            wait_until(lambda: len(client.nodegroups()) == 2, 240, "the session's two ranks registered")
            _acquire([sys.executable, "-m", "sectorflow"], path)
            wait_until(lambda: (out / scan_file_name(SCAN)).exists(), 60, "the session's file")
        finally:
            cancelled = subprocess.run([sys.executable, "-m", "sectorflow", "session", "cancel", "--config",
                                        str(path), job_id], capture_output=True, text=True, env=slurm_env, timeout=60)
            for log in logs.glob("*.log"):  # shown by pytest when the test fails
                print(log.read_text(errors="replace")[-3000:])
        assert cancelled.returncode == 0, cancelled.stderr
        wait_until(lambda: not client.nodegroups(), 60, "the ranks to deregister")
    wait_until(lambda: not set(rank_containers()) - earlier, 60, "the rank containers to end")
    counted = read_counted_scan(out / scan_file_name(SCAN))
    assert counted.scan_shape == (8, 8) and counted.metadata["scan"]["frames_complete"] == 64


def rank_containers() -> list[str]:
    """image/mpi-rank's containers (sectorflow-rank-<host>-<pid>) that still exist."""
    listed = subprocess.run([PODMAN, "ps", "-a", "--filter", "name=sectorflow-rank-", "--format", "{{.Names}}"],
                            capture_output=True, text=True, timeout=60)
    return listed.stdout.split()
