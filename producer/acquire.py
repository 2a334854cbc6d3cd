"""``sectorflow acquire``: ask every producer daemon to acquire a scan, optionally wait for it.

The request (``acquire/request``) carries the routing list this command reads from its own
kvstore replica, so that every producer thread routes the scan alike: NodeGroups registered ->
the scan streams; none -> every producer writes it to raw files in ``producer.fallback_dir``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from sectorflow.cli import add_config_argument
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.protocol import (
    ACQUIRE_REQUEST_KEY,
    SERVICE_PRODUCER,
    SOURCE_REPLAY,
    SOURCE_SIMULATOR,
    STATE_ERROR,
    STATE_FINISHED,
    AcquireRequest,
    ServiceStatus,
    wall_clock_s,
)
from sectorflow.simulator import parse_scan_shape
from sectorflow.waiting import WaitTimeout, every, wait_until

log = logging.getLogger(__name__)

MAX_SCAN_NUMBER = 0xFFFFFFFF
POLL_S = 0.1
PROGRESS_S = 1.0
SYNC_TIMEOUT_S = 10.0


def register(subparsers: Any) -> None:
    """Add the ``acquire`` subcommand."""
    parser = subparsers.add_parser(
        "acquire",
        help="ask the producers to acquire a scan (streamed if NodeGroups are registered, else written to disk)",
        description="Publish acquire/request with the scan, its shape, its rate, its source and the routing list "
        "(the sorted NodeGroups of the kvstore now; none = the producers write the scan to raw files in "
        "producer.fallback_dir). Every producer daemon acquires its sector once. With --wait, show progress and "
        "wait until every producer thread of the configuration reports the scan finished, then print a summary.",
    )
    add_config_argument(parser)
    parser.add_argument("--scan-number", required=True, metavar="N", help="scan number, 0 to 4294967295")
    parser.add_argument("--scan-shape", required=True, metavar="XxY",
                        help="probe positions per row x rows of positions, e.g. 128x128 (each 1 to 65535)")
    parser.add_argument("--rate", default=None, metavar="HZ",
                        help="frames per second (0: as fast as possible); default simulator.rate_hz")
    parser.add_argument("--replay", action="store_true",
                        help="stream the scan's raw files from producer.fallback_dir instead of simulating it")
    parser.add_argument("--wait", action="store_true", help="wait until every producer thread finished the scan")
    parser.add_argument("--timeout", default=None, metavar="S",
                        help="with --wait, give up after S seconds (default: wait as long as it takes)")
    parser.set_defaults(run=run)


def _number(text: str, option: str, low: float, high: float, kind: type) -> Any:
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise SectorflowError(f"{option} {text!r}: expected a number from {low} to {high}")
    return value


def expected_producers(config: Config) -> list[str]:
    """Status names of every producer thread of the configuration: r<R>t<T>."""
    return [f"r{r}t{t}" for r, receiver in enumerate(config.receivers) for t in range(receiver.threads)]


def run(args: argparse.Namespace, config: Config) -> int:
    """Publish the request; with --wait, wait for it and print the summary. Returns the exit code."""
    scan_x, scan_y = parse_scan_shape(args.scan_shape)
    scan = _number(args.scan_number, "--scan-number", 0, MAX_SCAN_NUMBER, int)
    rate = config.simulator.rate_hz if args.rate is None else _number(args.rate, "--rate", 0.0, float("inf"), float)
    timeout = None if args.timeout is None else _number(args.timeout, "--timeout", 0.0, float("inf"), float)
    with Client.from_config(config, name="acquire") as client:
        request, published_s = publish_request(client, config, scan, scan_x, scan_y, rate, args.replay)
        if request.routing:
            print(f"scan {scan}: requested {scan_x} x {scan_y} ({request.source}), streaming to "
                  f"{len(request.routing)} NodeGroups: {', '.join(request.routing)}", flush=True)
        else:
            print(f"scan {scan}: requested {scan_x} x {scan_y}; no NodeGroup registered: the producers write it "
                  f"to disk in {config.producer.fallback_dir}", flush=True)
        if not args.wait:
            return 0
        statuses = wait_for_scan(client, scan, expected_producers(config), timeout, published_s)
    print(summary(scan, statuses, config))
    return 0


def publish_request(client: Client, config: Config, scan: int, scan_x: int, scan_y: int, rate_hz: float,
                    replay: bool = False) -> tuple[AcquireRequest, float]:
    """Ask every producer daemon for a scan, routed to the NodeGroups registered now.

    Returns the request and its publication time (Unix seconds, for ``wait_for_scan``).
    Raises SectorflowError if the kvstore does not answer, or for a replay with no NodeGroup.
    """
    if not client.wait_synced(SYNC_TIMEOUT_S):
        kv = config.kvstore
        raise SectorflowError(f"kvstore at {kv.host}:{kv.port} did not answer within {SYNC_TIMEOUT_S:.0f} s; "
                              "is 'sectorflow kvstore' running?")
    routing = [record.uid for record in client.nodegroups()]
    source = SOURCE_REPLAY if replay else SOURCE_SIMULATOR
    if replay and not routing:
        raise SectorflowError(f"scan {scan}: --replay needs a registered NodeGroup to stream to, and none is; "
                              "start a streaming session first")
    request = AcquireRequest(scan_number=scan, scan_x=scan_x, scan_y=scan_y, rate_hz=rate_hz, routing=routing,
                             source=source)
    published_s = wall_clock_s()
    client.set_once(ACQUIRE_REQUEST_KEY, request.encode())
    return request, published_s


def wait_for_scan(
    client: Client, scan: int, names: list[str], timeout_s: float | None, since_s: float = 0.0
) -> dict[str, ServiceStatus]:
    """Wait until every producer thread in ``names`` reports ``finished`` for ``scan``.

    Only statuses stamped at or after ``since_s`` (Unix time; the request's publication) count, so
    an earlier run of the same scan number (a fallback before its replay) is not taken for this one.
    The stamps come from the producers' clocks: receiver servers are assumed to keep time (NTP).

    Raises:
        SectorflowError: a thread reports an error for the scan, or the timeout passes (the message lists
            the threads not finished and what they report).
    """
    current: dict[str, ServiceStatus] = {}
    mine: dict[str, ServiceStatus] = {}
    finished: list[str] = []

    def all_finished() -> bool:
        nonlocal current, mine, finished
        current = {name: status for (_, name), status in client.statuses(SERVICE_PRODUCER).items()}
        mine = {name: current[name] for name in names
                if name in current and current[name].scan == scan and current[name].updated_s >= since_s}
        errors = [f"{name}: {status.extra.get('error', 'error')}" for name, status in mine.items()
                  if status.state == STATE_ERROR]
        if errors:
            raise SectorflowError(f"scan {scan}: " + "; ".join(errors))
        finished = [name for name, status in mine.items() if status.state == STATE_FINISHED]
        return len(finished) == len(names)

    def progress(_elapsed_s: float) -> None:
        print(f"scan {scan}: {len(finished)} of {len(names)} producer threads finished, "
              f"{sum(s.messages for s in mine.values())} messages", file=sys.stderr, flush=True)

    try:
        # Polling the replica, which the kvstore agent keeps current.
        wait_until(all_finished, timeout_s, f"scan {scan}", POLL_S, on_poll=every(PROGRESS_S, progress))
    except WaitTimeout:
        waiting = [f"{name} ({current[name].state} scan {current[name].scan})" if name in current
                   else f"{name} (no status)" for name in names if name not in finished]
        raise SectorflowError(f"scan {scan}: not finished after {timeout_s:g} s; waiting for "
                              + ", ".join(waiting)) from None
    return mine


def summary(scan: int, statuses: dict[str, ServiceStatus], config: Config) -> str:
    """One line: streamed or written to disk, messages, bytes."""
    messages = sum(status.messages for status in statuses.values())
    size = sum(status.bytes for status in statuses.values())
    modes = {str(status.extra.get("mode", "")) for status in statuses.values()}
    if modes == {"streaming"}:
        groups = max(int(status.extra.get("nodegroups", 0)) for status in statuses.values())
        where = f"streamed to {groups} NodeGroups"
    elif modes == {"fallback"}:
        where = f"written to disk in {config.producer.fallback_dir}"
    else:
        where = "partly streamed, partly written to disk (" + ", ".join(sorted(modes)) + ")"
    return f"scan {scan}: {where} by {len(statuses)} producer threads: {messages} messages, {size} bytes"
