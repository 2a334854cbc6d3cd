"""The `sectorflow` command as a user meets it: help everywhere, one-line errors, no tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# What the README promises a user can run (its "Running the services" table and the demo).
SUBCOMMANDS = ("abort", "acquire", "aggregator", "dashboard", "demo", "down", "export", "keys", "kvstore", "libertem",
               "nodegroup", "producer", "session", "simulate", "status", "up", "view")


def sectorflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True, timeout=60,
                          env=env)


def test_help_lists_every_subcommand() -> None:
    result = sectorflow("--help")
    assert result.returncode == 0
    # Each subcommand starts an indented line of the "positional arguments" list.
    listing = result.stdout.split("positional arguments:", 1)[1].split("options:", 1)[0]
    listed = [line.split()[0] for line in listing.splitlines() if line.startswith("    ") and line[4] != " "]
    assert sorted(listed) == sorted(SUBCOMMANDS)


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_explains_itself(name: str) -> None:
    result = sectorflow(name, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: sectorflow " + name)


def test_a_config_with_a_typo_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "typo.toml"
    bad.write_text((Path(__file__).resolve().parents[2] / "configs" / "local.toml").read_text()
                   .replace("heartbeat_ms", "heartbeat"))
    result = sectorflow("simulate", "--config", str(bad), "--scan-shape", "2x2")
    assert result.returncode == 2
    assert result.stderr == (f"sectorflow simulate: error: {bad}: unknown key 'kvstore.heartbeat'; "
                             "did you mean 'heartbeat_ms'?\n")


def test_a_missing_config_file_is_one_line(tmp_path: Path) -> None:
    result = sectorflow("status", "--config", str(tmp_path / "none.toml"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no such configuration file" in result.stderr
    assert "Traceback" not in result.stderr


def broken_package(tmp_path: Path, name: str, error: str) -> dict[str, str]:
    """An environment in which importing ``name`` fails as it does on a machine without it."""
    package = tmp_path / "broken" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"raise ImportError({error!r})\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "broken"), os.environ.get("PYTHONPATH", "")])}


def test_a_nodegroup_whose_mpi_does_not_load_says_how_to_build_mpi4py_in_one_line(tmp_path: Path) -> None:
    # What PyPI's mpi4py wheel does on Debian's MPICH: its import cannot find libmpi.so.12.
    env = broken_package(tmp_path, "mpi4py", "libmpi.so.12: cannot open shared object file: No such file or directory")
    result = sectorflow("nodegroup", "--duration", "1", env=env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("sectorflow nodegroup: error: mpi4py cannot load an MPI library (libmpi.so.12")
    assert "pip install --no-binary mpi4py" in result.stderr


def test_a_demo_without_matplotlib_says_which_extra_before_it_starts_anything(tmp_path: Path) -> None:
    env = broken_package(tmp_path, "matplotlib", "No module named 'matplotlib'")
    result = sectorflow("demo", "--run-dir", str(tmp_path / "run"), env=env)
    assert result.returncode == 1
    assert result.stderr == ("sectorflow demo: error: matplotlib is needed to draw the scan's PNG (or run the demo "
                             "with --no-png) but cannot be imported (No module named 'matplotlib'); install it with: "
                             "pip install '.[plot]' in the sectorflow checkout (it is not on PyPI)\n")
    assert not (tmp_path / "run").exists()


def test_a_window_without_a_display_is_a_one_line_usage_error(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "WAYLAND_DISPLAY")}
    result = sectorflow("view", "--window", "--timeout", "600", env=env)
    assert result.returncode == 2  # at once: no kvstore asked, no 600 s wait
    assert result.stderr == ("sectorflow view: error: --window needs a display and neither DISPLAY nor WAYLAND_DISPLAY "
                             "is set: save the images with --png OUT, or leave out --window for text\n")


def test_acquire_and_abort_help_list_the_abort_exit_code() -> None:
    acquire = " ".join(sectorflow("acquire", "--help").stdout.split())
    assert "4 aborted by 'sectorflow abort N'" in acquire
    assert "130 Ctrl-C, which stops the waiting, not the scan (it names the abort command)" in acquire
    abort = " ".join(sectorflow("abort", "--help").stdout.split())
    assert "Exit codes: 0 aborted; 2 N is not a scan the kvstore knows; 1 the scan is over already" in abort
    bad = sectorflow("abort", "x7")
    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "sectorflow abort: error: scan number 'x7': expected a number from 0 to 4294967295"]
