"""A scan's relay records as JSON, read from inside a namespace (the caller outside cannot reach
the kvstore's address):

    python scan_records.py CONFIG SCAN

prints {"<j>": {"forwarded": N, "lost": N, "complete": bool, "dead": [...]}, ...} for each relay
thread j of the scan (member j // R of a tier), and under "-1" the scan's tier list ({"tier": [...]}).
Exit 1 with one line when the kvstore cannot be read.
"""

from __future__ import annotations

import json
import sys

from sectorflow.configs import load_config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.protocol import scan_prefix
from sectorflow.protocol.scan_parts import records_of

SYNC_S = 30.0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    config, scan = load_config(argv[0]), int(argv[1])
    try:
        with Client.from_config(config, name="netlab-records") as client:
            if not client.wait_synced(SYNC_S):
                raise SectorflowError(f"the kvstore did not sync within {SYNC_S:.0f} s")
            records = records_of(client.subtree(scan_prefix(scan)), scan)
    except SectorflowError as error:
        print(f"scan_records: {error}", file=sys.stderr)
        return 1
    found: dict[int, dict[str, object]] = {
        thread: {"forwarded": sum(relay.forwarded.values()), "lost": sum(relay.lost.values()),
                 "complete": relay.complete, "dead": sorted(relay.dead)}
        for thread, relay in records.relay_threads.items()}
    found[-1] = {"tier": list(records.request.tier) if records.request is not None else []}
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
