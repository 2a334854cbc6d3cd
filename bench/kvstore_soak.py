"""Soak: many small scans through a running local stack, and what the kvstore holds after them.

Once, every 16 x 16 scan left about 12 keys in the kvstore for ``scan_record_ttl_s`` (24 h),
so routine use filled it and scans were then reported pending; now the server folds each finished
scan into one summary (kvstore/SPEC.md, "Folding"). This runs ``--scans`` scans of ``--shape``
(default 2,000 of 4 x 4) one after the other through ``sectorflow up``'s stack, each accounted as
``sectorflow acquire --wait`` accounts it (one operator client for all), and prints every
``--every`` scans the kvstore's key count (in all, and in the stack's room), scans folded,
summaries dropped, scans evicted, refusals and resident memory. It fails (exit 1) at the first scan
not accounted whole.

``python -m bench.kvstore_soak [--config FILE] [--scans N] [--max-stack-keys K] [--scans-kept S]`` (not
a test: it takes about a second a scan on a laptop). ``--max-stack-keys`` shrinks the room of the
stack's records so that the oldest scans are seen to go first; ``--scans-kept`` the summaries kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.config_file import with_free_ports, write_config
from bench.proc_stats import rss_kib
from sectorflow.configs import load_config
from sectorflow.kvstore import Client
from sectorflow.orchestration import load_running
from sectorflow.operations.acquire import publish_request, wait_for_account
from sectorflow.protocol import ServiceStatus, status_key
from sectorflow.operations.scan_account import COMPLETE
from sectorflow.waiting import wait_until

START_S = 120.0
SCAN_TIMEOUT_S = 120.0


def sectorflow(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "sectorflow", *args], capture_output=True, text=True,
                            timeout=300)
    if result.returncode != 0:
        raise SystemExit(f"sectorflow {args[0]} failed: {result.stderr.strip()[-2000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="the stack's configuration (default: configs/local.toml)")
    parser.add_argument("--scans", type=int, default=2000)
    parser.add_argument("--shape", type=int, nargs=2, default=(4, 4), metavar=("X", "Y"))
    parser.add_argument("--every", type=int, default=100, help="print the kvstore's figures every N scans")
    parser.add_argument("--max-stack-keys", type=int, help="[kvstore] max_stack_keys for the run")
    parser.add_argument("--scans-kept", type=int, help="[kvstore] scans_kept for the run")
    args = parser.parse_args()

    config = with_free_ports(load_config(args.config))
    if args.max_stack_keys is not None:
        config = dataclasses.replace(config, kvstore=dataclasses.replace(config.kvstore,
                                                                           max_stack_keys=args.max_stack_keys))
    if args.scans_kept is not None:
        config = dataclasses.replace(config, kvstore=dataclasses.replace(config.kvstore, scans_kept=args.scans_kept))
    with tempfile.TemporaryDirectory(prefix="kvstore-soak-") as tmp:
        root = Path(tmp)
        path = root / "config.toml"
        config = write_config(config, path)
        run_dir = root / "run"
        sectorflow("up", "--config", str(path), "--run-dir", str(run_dir), "--output", str(root / "h5"),
                   "--no-dashboard")
        try:
            kvstore_pid = next(s.pid for s in load_running(run_dir) if s.name == "kvstore")
            with Client.from_config(config, name="soak", role="operator") as client:
                wait_until(lambda: client.nodegroups(), START_S, "a NodeGroup to register")
                started = time.monotonic()
                print("scans  keys  stack_keys  scans_folded  summaries_dropped  scans_evicted  refused_full  "
                      "refused_stack  kvstore_rss_kB  s", flush=True)
                for scan in range(1, args.scans + 1):
                    published = publish_request(client, config, scan, args.shape[0], args.shape[1], 0.0)
                    result = wait_for_account(client, published, SCAN_TIMEOUT_S)
                    if result.outcome != COMPLETE:
                        print(result.line(), *result.breakdown(), sep="\n", file=sys.stderr)
                        return 1
                    if scan % args.every == 0 or scan == args.scans:
                        raw = client.get(status_key("kvstore", "server"))
                        extra = ServiceStatus.decode(raw).extra if raw is not None else {}
                        print(f"{scan:5d}  {extra.get('keys', '?'):>4}  {extra.get('stack_keys', '?'):>10}  "
                              f"{extra.get('scans_folded', '?'):>12}  {extra.get('summaries_dropped', '?'):>17}  "
                              f"{extra.get('scans_evicted', '?'):>13}  {extra.get('refused_full', '?'):>12}  "
                              f"{extra.get('refused_stack', '?'):>13}  {rss_kib(kvstore_pid):>14}  "
                              f"{time.monotonic() - started:.0f}", flush=True)
        finally:
            sectorflow("down", "--config", str(path), "--run-dir", str(run_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
