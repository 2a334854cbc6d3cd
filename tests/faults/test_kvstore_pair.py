"""The kvstore pair's primary dies mid-scan (kvstore/SPEC.md, "The pair"): the whole local stack on a
pair, the primary SIGKILLed a quarter into a scan. The data path needs no kvstore while a scan runs,
every client moves to the backup (whose snapshot request is the vote) and writes its records there,
so the scan is counted whole, and no record written before the kill is lost: the earlier scan's
account is still there to read.

``pytest tests/faults/test_kvstore_pair.py -s`` prints the fault table's row and the time each service
took to move.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from harness import free_port_block
from test_faults import SECTORS, checked, first_scan, mid_scan, reasons_are

from sectorflow.kvstore import Client
from sectorflow.operations.scan_account import records_of
from sectorflow.protocol import scan_prefix
from sectorflow.waiting import wait_until

pytestmark = pytest.mark.mpi

LOOPBACK = "127.0.0.1"
PAIR_PORTS = 4  # each server of a pair uses P .. P + 3 (P + 3: the peer link)
SERVER_FIELD = "kvstore_server"  # a pair client's statuses say where it synced last
MOVE_S = 60.0


def test_the_kvstore_primary_killed_mid_scan_the_scan_is_counted_whole_on_the_backup(beamline, tmp_path: Path) -> None:
    first = free_port_block(LOOPBACK, 2 * PAIR_PORTS)
    primary, backup = f"{LOOPBACK}:{first}", f"{LOOPBACK}:{first + PAIR_PORTS}"
    line = beamline(kvstore={"servers": [primary, backup], "log_dir": str(tmp_path / "kvlog")})
    supervisor = line.start()
    before = first_scan(line)
    killed: list[float] = []

    def kill_primary(_: Client) -> None:
        line.kill(supervisor.process("kvstore-primary").pid)
        killed.append(time.monotonic())

    acquire = mid_scan(line, kill_primary)
    with Client.from_config(line.config, name="fault-test") as client:
        assert client.wait_synced(MOVE_S) and client.server == backup

        def moved() -> dict[tuple[str, str], object]:
            statuses = client.statuses()
            services = {key: status.extra.get(SERVER_FIELD) for key, status in statuses.items()
                        if key[0] in ("producer", "aggregator", "nodegroup")}
            return services if services and set(services.values()) == {backup} else {}

        services = wait_until(moved, MOVE_S, "every service's status written through the backup")
        print(f"kill of the primary to every service's status from the backup: {time.monotonic() - killed[0]:.2f} s "
              f"({len(services)} statuses)")
        result = checked(line, line.finish(acquire), 2, "kvstore primary killed mid-scan (a pair)")
        reasons_are(result)
        assert (result.outcome, result.exit_code, result.counted) == ("complete", 0, SECTORS), result.output
        # Nothing written before the kill is lost: scan 1's records (or their summary) are on the backup.
        earlier = records_of(client.subtree(scan_prefix(1)), 1)
        assert earlier.request is not None and earlier.file is not None and earlier.file.positions == 16
    assert {k: v for k, v in line.checksums().items() if k in before} == before
