"""The image `make image` builds runs the stack: a scan through services started in a container
equals the scan the venv's stack writes (README "Running from the image").

The container gets the host's network and the test's directory at the same path, so the
configuration written by make_config serves both stacks unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support import stack_up, wait_until

from sectorflow.counting import read_counted_scan
from sectorflow.nodegroup import scan_file_name

pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.mpi]

ROOT = Path(__file__).resolve().parents[2]
PODMAN = str(ROOT / "image" / "podman")
IMAGE = "localhost/sectorflow:latest"
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


def test_a_scan_through_the_images_stack_equals_the_venvs(make_config, container: list[str],
                                                          tmp_path: Path) -> None:
    config, path = make_config()
    venv_out, image_out = tmp_path / "venv-h5", tmp_path / "image-h5"
    with stack_up(config, path, tmp_path / "venv-run", venv_out):
        _acquire([sys.executable, "-m", "sectorflow"], path)
        wait_until(lambda: (venv_out / scan_file_name(SCAN)).exists(), 60, "the venv stack's file")

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

    ours, theirs = (read_counted_scan(out / scan_file_name(SCAN)) for out in (venv_out, image_out))
    assert theirs.scan_shape == ours.scan_shape == (8, 8)
    assert theirs.metadata["scan"]["frames_complete"] == 64
    assert len(theirs.events) == len(ours.events)
    for position, (a, b) in enumerate(zip(ours.events, theirs.events)):
        assert np.array_equal(np.sort(a), np.sort(b)), f"position {position}"
    assert sorted(theirs.images) == sorted(ours.images)
    for name, image in ours.images.items():
        assert np.array_equal(image, theirs.images[name]), name
