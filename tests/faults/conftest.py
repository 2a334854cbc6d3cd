"""Fault-test fixtures: a beamline (the whole local stack) per test, stopped however the test ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from beamline import Beamline, config_overrides

pytestmark = pytest.mark.mpi


@pytest.fixture
def beamline(make_config: Callable[..., Any], tmp_path: Path) -> Iterator[Callable[..., Beamline]]:
    """``beamline(**sections)``: a Beamline on configs/local.toml with the fault-test settings and ``sections``."""
    made: list[Beamline] = []

    def make(**sections: Any) -> Beamline:
        config, path = make_config(**config_overrides(**sections))
        line = Beamline(config, path, tmp_path / f"run{len(made)}")
        made.append(line)
        return line

    try:
        yield make
    finally:
        for line in made:
            line.stop()
