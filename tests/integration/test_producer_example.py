"""The embedding story: build and install sectorflow's C++ without Python, build the example
receiver program against the installed package with find_package(sectorflow), and run it on a
beamline file against a real kvstore: it streams its sector of a scan to a PULL where aggregator
thread r sits."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
from producer_support import (
    SMALL_DETECTOR,
    small_receivers,
    start_kvstore,
    start_standin,
    upstream_for,  # noqa: F401  (fixture)
    wait_for_nodegroups,
)
from support import REPO

from sectorflow.configs import DEFAULTS_TABLE
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
    # The defaults the installed sectorflow::configs compiled in, for people and tools to read.
    assert (prefix / "share" / "sectorflow" / "defaults.toml").read_text() == DEFAULTS_TABLE.read_text()
    run("cmake", "-S", "producer/examples", "-B", str(example), f"-DCMAKE_PREFIX_PATH={prefix}")
    run("cmake", "--build", str(example))

    # Receiver 2 streams with two producer threads: the example reads them from the file.
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(2))
    config = server.config
    upstream = upstream_for(config)
    start_standin(processes, server.path, tmp_path, "ng-a")
    with Client.from_config(config, name="test") as client:
        wait_for_nodegroups(client, ["ng-a"])
    result = subprocess.run(
        [str(example / "receiver_example"), "--config", str(server.path), "--receiver", "2",
         "--scan", "9", "--scan-x", "4", "--scan-y", "2"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "scan 9: streaming, 8 messages, 4096 bytes"
    upstream.collect(2, 8, "the example's messages")
    assert Counter((r, h[2], h[3]) for r, h, _ in upstream.data) == Counter((2, f, 2) for f in range(8))
    assert sorted(info["counts"]["ng-a"] for _, info in upstream.infos) == [4, 4]

    # A mistake in the file is one line naming the file and the key, before anything is connected.
    broken = tmp_path / "broken.toml"
    broken.write_text(server.path.read_text().replace("[producer]", "[producer]\nsend_hwn = 4", 1))
    result = subprocess.run(
        [str(example / "receiver_example"), "--config", str(broken), "--receiver", "2",
         "--scan", "10", "--scan-x", "4", "--scan-y", "2"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"receiver_example: error: {broken}: unknown key 'producer.send_hwn'; did you mean 'send_hwm'?\n"
    )
