"""Waits run from inside a namespace (the caller lives outside and cannot reach the namespaces'
addresses), with orchestration's own checks:

    python await_stack.py ready CONFIG NODEGROUPS TIMEOUT_S   every service announced, NODEGROUPS registered
    python await_stack.py sent CONFIG SCAN SECTORS TIMEOUT_S  the producers sent SECTORS sectors of SCAN
    python await_stack.py members CONFIG MEMBERS TIMEOUT_S    exactly MEMBERS members of the tier up

Exit 0 when the condition holds, 1 with one line naming what is missing.
"""

from __future__ import annotations

import sys

from sectorflow.aggregator.tier import members_up
from sectorflow.configs import load_config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.orchestration.readiness import Expected, sectors_sent, wait_ready
from sectorflow.waiting import wait_until


def main(argv: list[str]) -> int:
    if len(argv) < 1 or (argv[0], len(argv)) not in (("ready", 4), ("sent", 5), ("members", 4)):
        print(__doc__, file=sys.stderr)
        return 2
    config = load_config(argv[1])
    try:
        with Client.from_config(config, name="netlab-wait") as client:
            if argv[0] == "ready":
                wait_ready(client, Expected.of(config, int(argv[2])), float(argv[3]), lambda: None)
            elif argv[0] == "members":
                members = int(argv[2])
                wait_until(lambda: len(members_up(config, client.statuses("aggregator"))) == members,
                           float(argv[3]), f"{members} members of the aggregation tier up")
            else:
                scan, sectors = int(argv[2]), int(argv[3])
                wait_until(lambda: sectors_sent(client, scan) >= sectors, float(argv[4]), f"{sectors} sectors of scan {scan} sent")
    except SectorflowError as error:
        print(f"await_stack: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
