"""The `sectorflow` command as a user meets it: help everywhere, one-line errors, no tracebacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sectorflow.cli import build_parser


def sectorflow(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True, timeout=60)


def subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)


def test_help_lists_every_subcommand() -> None:
    result = sectorflow("--help")
    assert result.returncode == 0
    for name in subcommands():
        assert name in result.stdout


@pytest.mark.parametrize("name", subcommands())
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
