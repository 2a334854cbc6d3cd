"""The systemd units in configs/systemd run commands the CLI accepts, with the shipped config."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

import pytest

from sectorflow.cli import build_parser
from sectorflow.configs import CONFIG_DIR

UNITS = sorted((CONFIG_DIR / "systemd").glob("*.service"))


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_unit_runs_a_sectorflow_service_the_cli_accepts(unit: Path) -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(unit)
    assert parser["Unit"]["Description"]
    assert parser["Install"]["WantedBy"] == "multi-user.target"
    argv = shlex.split(parser["Service"]["ExecStart"].replace("%i", "0"))
    assert argv[0].endswith("/bin/sectorflow")
    args = build_parser().parse_args(argv[1:])
    assert args.command in {"kvstore", "aggregator", "producer"}
    assert args.config == "/etc/sectorflow/beamline.toml"


def test_every_daemon_has_a_unit() -> None:
    names = {unit.name for unit in UNITS}
    assert names == {"sectorflow-kvstore.service", "sectorflow-aggregator.service", "sectorflow-producer@.service"}
