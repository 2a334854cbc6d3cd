"""What `sectorflow up` suggests next is the README's scan loop ("At the microscope"), with
--config and --run-dir only for a stack that is not the default one."""

from __future__ import annotations

import tomllib
from pathlib import Path

from harness import write_toml

from sectorflow.configs import DEFAULT_CONFIG, load_config
from sectorflow.operations.run_dir import default_run_dir
from sectorflow.orchestration.cli import next_commands

README = Path(__file__).resolve().parents[2] / "README.md"


def test_up_suggests_the_readmes_commands_for_the_shipped_configuration() -> None:
    config = load_config(DEFAULT_CONFIG)
    assert next_commands(config, default_run_dir(config)) == (
        "next: 'sectorflow acquire --scan-shape 256x256 --wait' (the next free scan number; progress, then where "
        "every sector went), 'sectorflow status', 'sectorflow view --scan N'; stop with 'sectorflow down'")
    readme = README.read_text()
    for command in ("sectorflow acquire --scan-shape 256x256 --wait", "sectorflow status", "sectorflow view --scan",
                    "sectorflow down"):
        assert f"\nsectorflow {command.split(' ', 1)[1]}" in readme.split("## At the microscope", 1)[1], command


def test_another_stack_is_named_by_its_configuration_and_run_directory(tmp_path: Path) -> None:
    path = write_toml(tomllib.loads(DEFAULT_CONFIG.read_text()), tmp_path / "beamline.toml")
    config = load_config(path)
    suggested = next_commands(config, tmp_path / "run")
    assert f"'sectorflow acquire --config {path.resolve()} --scan-shape 256x256 --wait'" in suggested
    assert suggested.endswith(f"stop with 'sectorflow down --config {path.resolve()} --run-dir {tmp_path / 'run'}'")
