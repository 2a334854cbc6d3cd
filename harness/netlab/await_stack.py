"""Wait, from inside a namespace, until a stack is ready: ``python await_stack.py CONFIG NODEGROUPS
TIMEOUT_S``. The test process lives outside the namespaces and cannot reach their addresses, so it
runs this on the aggregator host; it is orchestration's own readiness check
(``sectorflow.orchestration.readiness``). Exit 0 when ready, 1 with one line naming what is missing.
"""

from __future__ import annotations

import sys

from sectorflow.configs import load_config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.orchestration.readiness import Expected, wait_ready


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, nodegroups, timeout_s = argv
    config = load_config(path)
    try:
        with Client.from_config(config, name="netlab-ready") as client:
            wait_ready(client, Expected.of(config, int(nodegroups)), float(timeout_s), lambda: None)
    except SectorflowError as error:
        print(f"await_stack: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
