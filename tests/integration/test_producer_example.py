"""The embedding story: build and install sectorflow's C++ without Python, build the example
receiver program against the installed package with find_package(sectorflow), and run it
against a real kvstore: it streams its sector of a scan to a PULL where aggregator thread r sits."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
from producer_support import (
    SMALL_DETECTOR,
    start_kvstore,
    start_standin,
    upstream_for,  # noqa: F401  (fixture)
    wait_for_nodegroups,
)
from support import REPO

from sectorflow.kvstore import Client

BUILD_S = 900.0


def run(*args: str, cwd: Path = REPO) -> None:
    result = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=BUILD_S)
    assert result.returncode == 0, f"{' '.join(args)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


@pytest.mark.slow
def test_example_receiver_links_the_installed_library_and_streams(
    make_config, processes, tmp_path: Path, upstream_for
) -> None:
    build, prefix, example = tmp_path / "build", tmp_path / "prefix", tmp_path / "example"
    run("cmake", "-S", ".", "-B", str(build), "-DSECTORFLOW_PYTHON=OFF", f"-DCMAKE_INSTALL_PREFIX={prefix}")
    run("cmake", "--build", str(build), "-j2")
    run("cmake", "--install", str(build))
    run("cmake", "-S", "producer/examples", "-B", str(example), f"-DCMAKE_PREFIX_PATH={prefix}")
    run("cmake", "--build", str(example))

    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR)
    config = server.config
    upstream = upstream_for(config)
    start_standin(processes, server.path, tmp_path, "ng-a")
    with Client.from_config(config, name="test") as client:
        wait_for_nodegroups(client, ["ng-a"])
    result = subprocess.run(
        [str(example / "receiver_example"), "--kvstore-host", "127.0.0.1", "--kvstore-port", str(config.kvstore.port),
         "--aggregator", f"tcp://127.0.0.1:{config.aggregator.base_port + 2}", "--receiver", "2", "--threads", "2",
         "--scan", "9", "--scan-x", "4", "--scan-y", "2", "--fallback-dir", str(tmp_path / "raw"),
         "--frame", "32x32", "--sector", "8x32"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "scan 9: streaming, 8 messages, 4096 bytes"
    upstream.collect(2, 8, "the example's messages")
    assert Counter((r, h[2], h[3]) for r, h, _ in upstream.data) == Counter((2, f, 2) for f in range(8))
    assert sorted(info["counts"]["ng-a"] for _, info in upstream.infos) == [4, 4]
