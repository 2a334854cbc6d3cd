"""The netlab tests build network namespaces (harness/netlab): root only, each marked ``netns``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.netns)
            if os.geteuid() != 0:
                item.add_marker(pytest.mark.skip(reason="network namespaces need root (ip netns add)"))


# The fault suite's accounting (tests/faults/beamline.py: the account line, the sectors in a file
# and on disk) is what the netlab tests check against too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
