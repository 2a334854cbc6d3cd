"""``sectorflow abort N``: stop a running scan everywhere.

Writes ``scans/<n>/abort`` (``sectorflow.protocol.scan_life.ScanAbort``). The producer daemons watch it: every
thread stops sending the scan at its next sector and records ``error`` with the abort and what it sent
and spilled before (a scan not begun yet is refused). The aggregator's relay threads close the
scan once what the producers sent has come through, the NodeGroups once what the relays forwarded has
come (protocol/SPEC.md, steps 5 and 6; not after ``[nodegroup] scan_timeout_s``), and rank 0 writes the
file with what was counted, outcome ``aborted``.
``sectorflow acquire --wait`` of the scan then exits 4 and ``sectorflow status`` shows it aborted.

Exit codes: 0 the abort was taken by the kvstore; 2 a scan number that is not a number or names no
scan the kvstore knows; 1 a scan that is over already (or aborted before), or a kvstore that does not
answer or take the abort.
"""

from __future__ import annotations

import argparse
from typing import Any

from sectorflow.cli import add_config_argument, add_verbose_argument
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError, UsageError
from sectorflow.kvstore import Client
from sectorflow.protocol import scan_prefix, wall_clock_s
from sectorflow.operations.scan_account import PENDING, account, records_of
from sectorflow.protocol.scan_life import ScanAbort, abort_key, who

from .acquire import MAX_SCAN_NUMBER, SYNC_TIMEOUT_S, await_taken


def register(subparsers: Any) -> None:
    """Add the ``abort`` subcommand."""
    parser = subparsers.add_parser(
        "abort",
        help="stop a running scan: producers stop sending it, its file and account say aborted",
        description="Abort scan N: every producer thread stops sending it at its next sector, the relays and NodeGroups "
        "close it as soon as what was sent has come through, and its file is written with what was counted before, "
        "outcome 'aborted' "
        "(its 'acquire --wait' exits 4). Exit codes: 0 aborted; 2 N is not a scan the kvstore knows; "
        "1 the scan is over already, or the kvstore did not take the abort.",
    )
    add_config_argument(parser)
    add_verbose_argument(parser)
    parser.add_argument("scan_number", metavar="N", help="the scan to abort")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, config: Config) -> int:
    try:
        scan = int(args.scan_number)
    except ValueError:
        scan = -1
    if not 0 <= scan <= MAX_SCAN_NUMBER:
        raise UsageError(f"scan number {args.scan_number!r}: expected a number from 0 to {MAX_SCAN_NUMBER}")
    kv = config.kvstore
    with Client.from_config(config, subtree=scan_prefix(scan), name="abort", role="operator") as client:
        if not client.wait_synced(SYNC_TIMEOUT_S):
            raise SectorflowError(f"kvstore at {kv.address} did not answer within {SYNC_TIMEOUT_S:.0f} s; "
                                  "is 'sectorflow kvstore' running?")
        records = records_of(client.subtree(scan_prefix(scan)), scan)
        if records.request is None and not records.producers:
            raise UsageError(f"scan {scan} is not known to the kvstore (never acquired, or its records expired); "
                             "'sectorflow status' lists the recent scans")
        if records.abort is not None:
            raise SectorflowError(f"scan {scan} was aborted already, by {records.abort.by}")
        so_far = account(records)
        if so_far.outcome != PENDING:
            raise SectorflowError(f"scan {scan} is over ({so_far.outcome}); nothing to abort")
        abort = ScanAbort(who(), wall_clock_s())
        client.set_once(abort_key(scan), abort.encode(), kv.scan_record_ttl_s)
        # A scan that ends as soon as its producers stop (written to disk) is folded moments after
        # the abort: its summary then holds the abort and the key is gone, maybe before a poll saw it.
        await_taken(client, config, abort_key(scan), f"scan {scan}", "the abort",
                    lambda: records_of(client.subtree(scan_prefix(scan)), scan).abort is not None)
    print(f"scan {scan}: aborted; the producers stop sending it, and its file will hold what was counted before "
          "(outcome aborted)", flush=True)
    return 0
