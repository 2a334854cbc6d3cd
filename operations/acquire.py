"""``sectorflow acquire``: ask every producer daemon to acquire a scan, optionally wait for it.

The request (``acquire/request``) carries the routing list this command reads from its own
kvstore replica, so that every producer thread routes the scan alike: NodeGroups registered ->
the scan streams; none -> every producer writes it to raw files in ``producer.fallback_dir``.

The scan's request record (``scans/<n>/request``) is written with it; each producer thread takes the
request by writing its part of the scan's record, and until all have, a request that a kvstore
restart took away is published again. ``--wait`` shows each receiver's progress (``progress``: the
producers' records carry it while the scan runs), waits for the scan's outcome, which the scan's
records give (``sectorflow.operations.scan_account``), and exits with it: 0 complete (every sector counted in
the file), or "on disk, not counted" (no NodeGroup was registered: every sector in raw files, as
planned; the line names the ``--replay`` command that counts it), 3 nothing missing but some
sectors spilled to raw files (``--replay`` completes the scan), 4 aborted (``sectorflow abort``), 1
sectors missing, no file, or not over within ``--timeout``; 2 is a usage error. When a LiberTEM
bridge (``sectorflow libertem``) had the scan, a line under the account says how many positions
LiberTEM got empty (``libertem_account``).

A replay is refused before anything is written when it has nothing to do or nobody to count it
(``replay_check``): the scan's records and file stay as they were.

The scan number is claimed first (``scans/<n>/claim``, written create-only: the kvstore takes one claim
per number, ``sectorflow.protocol.scan_life``): without ``--scan-number`` the next unused number is claimed, the
one after if another acquire won it, so concurrent acquires never share a number; a claim far above
the scans acquired is left out of that numbering, with a warning (``numbering``). An abort of the
scan in the kvstore before its request is no operator's: it is erased, with a warning
(``withdraw_earlier_abort``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from collections.abc import Callable
from typing import Any

from sectorflow.cli import add_config_argument, add_verbose_argument
from sectorflow.configs import Config, InstrumentConfig
from sectorflow.errors import SectorflowError, UsageError
from sectorflow.kvstore import Client
from sectorflow.protocol import (
    ACQUIRE_REQUEST_KEY,
    SCANS_PREFIX,
    SERVICE_AGGREGATOR,
    SERVICE_PRODUCER,
    SOURCE_REPLAY,
    SOURCE_SIMULATOR,
    STATE_IDLE,
    STATE_STREAMING,
    AcquireRequest,
    ProtocolError,
    ScanRequestRecord,
    ServiceStatus,
    scan_prefix,
    scan_request_key,
    status_key,
    wall_clock_s,
)
from sectorflow.operations.scan_account import (
    COMPLETE,
    LIBERTEM_SERVICE,
    PENDING,
    ScanAccount,
    ScanRecords,
    abandoned_producers,
    account,
    config_argument,
    kvstore_full,
    libertem_notes,
    records_of,
)
from sectorflow.protocol.scan_instrument import ScanInstrument, fields as instrument_fields, instrument_key
from sectorflow.protocol.scan_life import ScanAbort, ScanClaim, abort_key, claim_key
from sectorflow.simulator import parse_scan_shape
from sectorflow.waiting import WaitTimeout, wait_until

from sectorflow.absences import Absences, gone_after_s
from sectorflow.aggregator.tier import scan_tier
from .progress import ScanProgress
from .replay_check import counted_already_by, replay_refusal

log = logging.getLogger(__name__)

MAX_SCAN_NUMBER = 0xFFFFFFFF
POLL_S = 0.1
SYNC_TIMEOUT_S = 10.0
# Without --wait: how long to see every producer thread take the request (re-publishing it meanwhile
# if a kvstore restart took it away) before leaving that to them.
ACK_WAIT_S = 5.0


def register(subparsers: Any) -> None:
    """Add the ``acquire`` subcommand."""
    parser = subparsers.add_parser(
        "acquire",
        help="ask the producers to acquire a scan (streamed if NodeGroups are registered, else written to disk)",
        description="Publish acquire/request with the scan, its shape, its rate, its source and the routing list "
        "(the sorted NodeGroups of the kvstore now; none = the producers write the scan to raw files in "
        "producer.fallback_dir). Every producer daemon acquires its sector once. With --wait, show progress, wait "
        "for the scan's outcome and print where every sector ended: counted in the file, spilled to a raw file on "
        "its receiver under a fault, on disk as planned (no NodeGroup: the line names the --replay command that "
        "counts it), or missing (with where it was last seen); while the scan runs, each receiver's progress, rate "
        "and time left goes to stderr (a live bar on a terminal, a line every 2 s otherwise). Exit codes with --wait: "
        "0 every sector counted (or, with no NodeGroup, 'on disk, not counted': every sector written to disk); "
        "3 none missing but some spilled to raw files "
        "(acquire --replay completes the file); 1 sectors missing, no file, or --timeout passed; 2 a bad argument or "
        "configuration (a scan number used before is one); "
        "4 aborted by 'sectorflow abort N' (what was counted before is in the file); "
        "130 Ctrl-C, which stops the waiting, not the scan (it names the abort command). A scan number is used once: "
        "one used before is refused; without --scan-number the next unused one is claimed (concurrent acquires get "
        "different numbers).",
    )
    add_config_argument(parser)
    add_verbose_argument(parser)
    parser.add_argument("--scan-number", default=None, metavar="N",
                        help="scan number, 0 to 4294967295 (default: the next unused one, claimed atomically; "
                        "--replay needs it)")
    parser.add_argument("--scan-shape", required=True, metavar="XxY",
                        help="probe positions per row x rows of positions, e.g. 128x128 (each 1 to 65535)")
    parser.add_argument("--rate", default=None, metavar="HZ",
                        help="frames per second (0: as fast as possible); default simulator.rate_hz")
    parser.add_argument("--replay", action="store_true",
                        help="stream the scan's raw files from producer.fallback_dir instead of simulating it; "
                        "refused (exit 2) for a scan counted complete or with no raw file known, and (exit 1) into "
                        "NodeGroups that counted it already")
    for name in instrument_fields():
        parser.add_argument(_instrument_option(name), default=None, metavar="X", dest=name,
                            help=f"this scan's [instrument] {name}: {_instrument_doc(name)}; recorded in the file "
                            "under /metadata/instrument (default: the configuration's)")
    parser.add_argument("--wait", action="store_true", help="wait for the scan's outcome and exit with it (see above)")
    parser.add_argument("--timeout", default=None, metavar="S",
                        help="with --wait, give up after S seconds (default: wait as long as it takes)")
    parser.set_defaults(run=run)


def _number(text: str, option: str, low: float, high: float, kind: type) -> Any:
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise UsageError(f"{option} {text!r}: expected a number from {low} to {high}")
    return value


def _instrument_option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _instrument_doc(name: str) -> str:
    return next(f.metadata["doc"] for f in dataclass_fields(InstrumentConfig) if f.name == name)


def instrument_of(args: argparse.Namespace, config: Config) -> ScanInstrument:
    """The scan's instrument settings: the configuration's, each replaced by its option when given."""
    given = {name: None if getattr(args, name, None) is None else
             _number(getattr(args, name), _instrument_option(name), 0.0, float("inf"), float)
             for name in instrument_fields()}
    return ScanInstrument.of(config.instrument, given)


def expected_producers(config: Config) -> list[str]:
    """Status names of every producer thread of the configuration: r<R>t<T>."""
    return [f"r{r}t{t}" for r, receiver in enumerate(config.receivers) for t in range(receiver.threads)]


def run(args: argparse.Namespace, config: Config) -> int:
    """Publish the request; with --wait, wait for the scan's outcome. Returns the exit code."""
    scan_x, scan_y = parse_scan_shape(args.scan_shape)
    if args.scan_number is None and args.replay:
        raise UsageError("--replay needs --scan-number: the scan whose raw files are streamed")
    scan = None if args.scan_number is None else _number(args.scan_number, "--scan-number", 0, MAX_SCAN_NUMBER, int)
    rate = config.simulator.rate_hz if args.rate is None else _number(args.rate, "--rate", 0.0, float("inf"), float)
    timeout = None if args.timeout is None else _number(args.timeout, "--timeout", 0.0, float("inf"), float)
    instrument = instrument_of(args, config)
    with Client.from_config(config, name="acquire", role="operator") as client:
        published = publish_request(client, config, scan, scan_x, scan_y, rate, args.replay, instrument)
        if config.security.enabled:
            _check_accepted(client, config, published)
        request = published.request
        scan = request.scan_number
        # From here the request is the producers': a Ctrl-C at any point stops nobody's work, only
        # this command's waiting (also one that comes before the wait begins).
        try:
            if request.routing:
                print(f"scan {scan}: requested {scan_x} x {scan_y} ({request.source}), streaming to "
                      f"{len(request.routing)} NodeGroups: {', '.join(request.routing)}", flush=True)
            else:
                print(f"scan {scan}: requested {scan_x} x {scan_y}; no NodeGroup registered: the producers write "
                      f"it to disk in {config.producer.fallback_dir}", flush=True)
            if not args.wait:
                waiting = published.wait_taken(client, ACK_WAIT_S)
                if waiting:
                    print(f"scan {scan}: not yet taken by {', '.join(waiting)} (busy, or not running); they take it "
                          "when they are idle, unless the kvstore restarts first: use --wait to see it through",
                          file=sys.stderr, flush=True)
                return 0
            result = wait_for_account(client, published, timeout)
        except KeyboardInterrupt:
            config_option = f" --config {args.config}" if args.config else ""
            print(f"scan {scan}: no longer waited for; the scan goes on (the producers and NodeGroups do not stop): "
                  f"'sectorflow status{config_option}' shows it, 'sectorflow abort{config_option} {scan}' stops it",
                  file=sys.stderr, flush=True)
            return 130
        if result.outcome != PENDING:
            result.notes += libertem_account(client, config, scan)
    print(result.line(config_argument(config.source)))
    if result.outcome != COMPLETE or result.missing or result.spilled:
        print("\n".join(result.breakdown()))
    else:
        for note in result.notes:
            if note.startswith("LiberTEM "):
                print(f"  {note}")
    return result.exit_code


def libertem_account(client: Client, config: Config, scan: int) -> list[str]:
    """What the LiberTEM bridges say of ``scan`` once they finished it (scan_account's
    ``libertem_notes``); none when no bridge had it.

    A bridge is behind the file by the live stream's period, gives a missing position up
    ``[libertem] empty_after_s`` after the scan's end at the latest, and a client that holds the
    scan unread is dropped ``[libertem] read_deadline_s`` after it stopped reading (the scan is then
    not served): it is waited for that long, and two heartbeats more, before this says it has not
    finished the scan.
    """
    def behind() -> dict[str, ServiceStatus]:
        # A bridge has the scan (or one before it) open, or holds a client and has not had it yet.
        return {name: status for (_, name), status in client.statuses(LIBERTEM_SERVICE).items()
                if (status.state == STATE_STREAMING and status.scan <= scan)
                or (status.extra.get("client_connected") and status.state == STATE_IDLE
                    and int(status.extra.get("last_scan", -1)) < scan)}

    libertem = config.libertem
    wait_s = libertem.empty_after_s + libertem.read_deadline_s + 2 * config.kvstore.heartbeat_ms / 1000
    late: list[str] = []
    try:
        wait_until(lambda: not behind(), wait_s, f"the LiberTEM bridges to finish scan {scan}", POLL_S)
    except WaitTimeout:
        late = [f"LiberTEM (bridge {name}): has not finished the scan {wait_s:g} s after it (at scan "
                f"{status.scan}): 'sectorflow status' shows it when it has" for name, status in sorted(behind().items())]
    return libertem_notes(client.statuses(LIBERTEM_SERVICE), scan) + late


@dataclass
class PublishedRequest:
    """A request as published, re-published while a producer thread has not taken it."""

    request: AcquireRequest
    record: ScanRequestRecord
    published_s: float   # Unix seconds: records older than this are an earlier run's
    ttl_s: float
    gone_after_s: float  # a status or registration absent this long is taken for dead (Absences)
    seen: bool = False   # the request came back from the server into this replica
    rejected: set[tuple[str, str]] = field(default_factory=set)  # (key, why) of records logged as bad

    def taken_by(self, records: ScanRecords) -> set[tuple[int, int]]:
        """The producer threads that wrote their part of this run of the scan (their acknowledgement)."""
        return {name for name, part in records.producers.items() if part.updated_s >= self.published_s}

    def not_taken(self, records: ScanRecords) -> list[str]:
        taken = self.taken_by(records)
        return [f"r{r}t{t}" for r, threads in enumerate(self.record.producer_threads) for t in range(threads)
                if (r, t) not in taken]

    def republish_if_lost(self, client: Client) -> bool:
        """Publishes again what a kvstore restart took away (neither is owned, so no client restores it).

        Only when the request key is empty: a request made since by someone else is not overwritten.
        """
        if not client.synced():
            return False
        if client.get(ACQUIRE_REQUEST_KEY) is not None:
            self.seen = True  # the server has it: from now on, its absence means it was lost
            return False
        if not self.seen:
            return False
        client.set_once(ACQUIRE_REQUEST_KEY, self.request.encode())
        if client.get(scan_request_key(self.request.scan_number)) is None:
            client.set_once(scan_request_key(self.request.scan_number), self.record.encode(), self.ttl_s)
        log.warning("scan %d: the request was gone from the kvstore (restarted?) before every producer took "
                    "it; published again", self.request.scan_number)
        return True

    def records(self, client: Client) -> ScanRecords:
        """This run's records: parts stamped before the request are an earlier run's and left out.

        A record that does not decode is left out too, and logged once per key and reason.
        """
        scan = self.request.scan_number
        records = records_of(client.subtree(scan_prefix(scan)), scan)
        for key, why in records.rejected.items():
            if (key, why) not in self.rejected:
                self.rejected.add((key, why))
                log.warning("skipped %s, which does not decode: %s", key, why)
        records.request = self.record
        records.producers = {name: part for name, part in records.producers.items()
                             if part.updated_s >= self.published_s}
        if records.file is not None and records.file.written_s < self.published_s:
            records.file = None
        return records

    def wait_taken(self, client: Client, timeout_s: float) -> list[str]:
        """Waits up to ``timeout_s`` until every producer thread took the request; returns the others."""
        waiting: list[str] = []

        def taken() -> bool:
            nonlocal waiting
            self.republish_if_lost(client)
            waiting = self.not_taken(self.records(client))
            return not waiting

        try:
            wait_until(taken, timeout_s, "the producers to take the request", POLL_S)
        except WaitTimeout:
            pass
        return waiting


# The least time the server is given to echo a request before it counts as refused: a loaded
# machine must not pass for a refusal (5 s did not hold: four acquires racing for a number beside the
# test suite on two cores waited longer for one claim).
MIN_TAKE_S = 10.0


def await_taken(client: Client, config: Config, key: str, scan_text: str, what: str,
                taken: Callable[[], bool] | None = None) -> None:
    """Wait until the kvstore holds ``key`` (just written by this client), or until ``taken()`` when
    given; SectorflowError if it does not within a silence period: with [security] on the server
    drops, silently to the writer, a scan record whose key is not an operator's (kvstore/SPEC.md,
    "Security")."""
    kv = config.kvstore
    silence_s = max(kv.heartbeat_ms * kv.silence_heartbeats / 1000, MIN_TAKE_S)
    held = taken or (lambda: client.get(key) is not None)
    try:
        wait_until(held, silence_s, f"the kvstore to take {what}", POLL_S)
    except WaitTimeout:
        raise SectorflowError(
            f"{scan_text}: the kvstore did not take {what} within {silence_s:g} s"
            + (f" (with [security] on, only an operator's key may write it: this host's key in "
               f"{config.security.key_dir}/operator/?)" if config.security.enabled else "")
        ) from None


def _check_accepted(client: Client, config: Config, published: PublishedRequest) -> None:
    """Raise SectorflowError unless the server took the request: it refuses, silently to the writer,
    an acquire/request whose key is not an operator's (kvstore/SPEC.md, "Security")."""
    expected = published.request.encode()
    kv = config.kvstore
    silence_s = max(kv.heartbeat_ms * kv.silence_heartbeats / 1000, MIN_TAKE_S)
    try:
        wait_until(lambda: client.get(ACQUIRE_REQUEST_KEY) == expected, silence_s, "the kvstore to take the request",
                   POLL_S)
    except WaitTimeout:
        raise SectorflowError(
            f"scan {published.request.scan_number}: the kvstore did not take the request within {silence_s:g} s: "
            f"only an operator's key may write {ACQUIRE_REQUEST_KEY} (this host's key is in "
            f"{config.security.key_dir}/operator/? 'sectorflow status' counts the refusal as unauthorised)"
        ) from None


def publish_request(client: Client, config: Config, scan: int | None, scan_x: int, scan_y: int, rate_hz: float,
                    replay: bool = False, instrument: ScanInstrument | None = None) -> PublishedRequest:
    """Ask every producer daemon for a scan, routed to the NodeGroups registered now.

    Claims the scan number (``scans/<n>/claim``; ``scan`` None: the next unused one), then writes the
    scan's instrument settings (``scans/<n>/instrument``: ``instrument``, None: the configuration's; a
    replay keeps the scan's own), its request record (``scans/<n>/request``), then ``acquire/request``.
    Raises SectorflowError if the kvstore does not answer, for a number used or claimed before, or for a
    replay with no NodeGroup or into NodeGroups that counted the scan already; UsageError (exit 2) for a replay of a scan with
    nothing to replay (``replay_check``). Every refusal comes before anything is written.
    """
    if not client.wait_synced(SYNC_TIMEOUT_S):
        kv = config.kvstore
        raise SectorflowError(f"kvstore at {kv.address} did not answer within {SYNC_TIMEOUT_S:.0f} s; "
                              "is 'sectorflow kvstore' running?")
    if scan is None:
        scan = claim_next_scan(client, config)
        records = ScanRecords(scan)  # a number nobody used
    else:
        records = records_of(client.subtree(scan_prefix(scan)), scan)
        refusal = replay_refusal(records, config.producer.fallback_dir) if replay else None
        if refusal is not None:
            raise UsageError(refusal)
        # A number used before is a bad argument (exit 2), whoever used it.
        if not replay and earlier_run(records) is not None:
            raise UsageError(used_number_refusal(records, next_unused_scan(client), config.producer.fallback_dir))
        if not replay and not claim_scan(client, config, scan):
            raise UsageError(f"scan {scan} is claimed by another acquire ({_claimant(client, scan)}): a scan "
                                  f"number is used once; the next unused is {next_unused_scan(client)}")
    routing = [record.uid for record in client.nodegroups()]
    source = SOURCE_REPLAY if replay else SOURCE_SIMULATOR
    if replay and not routing:
        raise SectorflowError(f"scan {scan}: --replay needs a registered NodeGroup to stream to, and none is; "
                              "start a streaming session first")
    counted_by = counted_already_by(records, routing) if replay else []
    if counted_by:
        raise SectorflowError(f"scan {scan}: NodeGroups {', '.join(counted_by)} counted it already and refuse another "
                              "count (a NodeGroup remembers its scans): replay it once the next NodeGroup job runs "
                              "(a new streaming session)")
    request = AcquireRequest(scan_number=scan, scan_x=scan_x, scan_y=scan_y, rate_hz=rate_hz, routing=routing,
                             source=source)
    request.tier = scan_tier(config, client.statuses(SERVICE_AGGREGATOR))
    down = sorted(set(range(len(config.aggregator.hosts))) - set(request.tier)) if request.tier else []
    if down:
        log.warning("scan %d: aggregator member(s) %s of the tier are down: the scan goes through %s", scan,
                    ", ".join(map(str, down)), ", ".join(map(str, request.tier)))
    published_s = wall_clock_s()
    record = ScanRequestRecord(scan_number=scan, scan_x=scan_x, scan_y=scan_y, source=source, routing=routing,
                               producer_threads=[receiver.threads for receiver in config.receivers],
                               requested_s=published_s)
    record.tier = list(request.tier)
    ttl_s = config.kvstore.scan_record_ttl_s
    withdraw_earlier_abort(client, scan)
    # A replay keeps the scan's own settings, held by its key or, once the scan was over, by its
    # summary (kvstore/SPEC.md, "Folding"; the services read them from either, as records_of does).
    if not (replay and records.instrument is not None):
        client.set_once(instrument_key(scan), (instrument or ScanInstrument.of(config.instrument)).encode(), ttl_s)
    client.set_once(scan_request_key(scan), record.encode(), ttl_s)
    client.set_once(ACQUIRE_REQUEST_KEY, request.encode())
    return PublishedRequest(request, record, published_s, ttl_s, gone_after_s(config))


def withdraw_earlier_abort(client: Client, scan: int) -> None:
    """Erases an abort of ``scan`` that is in the kvstore before its request, with a warning naming it.

    ``sectorflow abort`` refuses a scan not requested, so such an abort is no operator's abort of this
    scan: a record left from an earlier life of the number, or written by anyone on the network of a
    stack without [security]. Erased rather than ignored by each reader: the aggregator, rank 0's file
    and the account take the key's presence for the abort, and the kvstore delivers this client's
    erase before its request, so no reader sees the request with it. The producers and NodeGroups
    also take no abort that comes before the request (by the kvstore's order, not by clocks).
    """
    raw = client.get(abort_key(scan))
    if raw is None:
        return
    try:
        abort = ScanAbort.decode(raw)
        what = f"by {abort.by} at {_utc(abort.requested_s)}"
    except ProtocolError as error:
        what = f"that does not decode ({error})"
    client.erase(abort_key(scan))
    # Until the erase comes back this command's own account would read the scan as aborted.
    try:
        wait_until(lambda: client.get(abort_key(scan)) is None, MIN_TAKE_S, "the kvstore to erase the abort", POLL_S)
    except WaitTimeout:
        raise SectorflowError(f"scan {scan}: an abort {what} is in the kvstore from before the scan was requested, "
                              f"and the kvstore did not erase it within {MIN_TAKE_S:g} s") from None
    log.warning("scan %d: an abort %s was in the kvstore before the scan was requested: ignored and erased "
                "(only 'sectorflow abort %d' after this request stops it)", scan, what, scan)


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def earlier_run(records: ScanRecords) -> str | None:
    """What became of an earlier acquisition of the scan if its records hold one (its request or
    a producer's part), else None. The producers ignore a request for a scan they acquired already,
    so a second one would never end."""
    if records.request is None and not records.producers:
        return None
    if records.file is None:
        return "no file yet: it is running, or its NodeGroups never wrote one"
    where = f": {records.file.path}" if records.file.path else ""
    return f"outcome {records.file.outcome}{where}"


def used_number_refusal(records: ScanRecords, next_unused: int, fallback_dir: str) -> str:
    """The refusal of a scan number acquired before (``earlier_run`` is not None): what became of it,
    the next unused number and, only when a replay of it would be taken (``replay_refusal``), that
    --replay streams its raw files again."""
    scan = records.scan
    text = (f"scan {scan} was acquired before ({earlier_run(records)}): a scan number is used once; the next unused "
            f"is {next_unused}")
    if replay_refusal(records, fallback_dir) is None:
        text += f", and --replay streams scan {scan}'s raw files again"
    return text


# How many numbers an acquire tries before giving up: each lost claim means another acquire won it.
MAX_CLAIM_TRIES = 100


def claim_scan(client: Client, config: Config, scan: int) -> bool:
    """Claims ``scan`` for this process; True if the claim is ours, False if another's holds it.

    The kvstore takes a create-only write only while the key is absent (kvstore/SPEC.md, "Wire"), so
    of several claims of one number exactly one is in the map; every claimant reads back whose.
    """
    claim = ScanClaim.new()
    client.create_once(claim_key(scan), claim.encode(), config.kvstore.scan_record_ttl_s)
    await_taken(client, config, claim_key(scan), f"scan {scan}", "the claim of the number")
    try:
        return ScanClaim.decode(client.get(claim_key(scan)) or b"") == claim
    except ProtocolError:
        return False  # somebody wrote something else there: not ours


def _claimant(client: Client, scan: int) -> str:
    try:
        return ScanClaim.decode(client.get(claim_key(scan)) or b"").claimant
    except ProtocolError as error:
        return f"a claim that does not decode: {error}"


def claim_next_scan(client: Client, config: Config) -> int:
    """Claims the next unused scan number, the one after for each claim another acquire won.

    Claims far above the scans acquired are left out of the numbering, with a warning naming them
    (``numbering``).
    """
    scan, odd = numbering(client)
    for claim in odd:
        log.warning("scan %d: claimed by %s but never requested, more than %d above the highest scan acquired: "
                    "left out of the numbering (on a stack without [security], anyone on its network can write a "
                    "claim: docs/deployment.md)", claim, _claimant(client, claim), PLAUSIBLE_CLAIMS)
    for _ in range(MAX_CLAIM_TRIES):
        if scan > MAX_SCAN_NUMBER:
            break
        if claim_scan(client, config, scan):
            return scan
        scan = max(scan + 1, numbering(client)[0])
    raise SectorflowError(f"no scan number claimed in {MAX_CLAIM_TRIES} tries (up to {scan}): other acquires took "
                          "each one first, or the numbers are used up; give one with --scan-number")


# How far above the highest scan acquired a claim without a request still counts for the numbering.
# Such a claim is an acquire between its claim and its request, or one that died there: they sit
# just above the acquired scans (each automatic claim is one above the highest). Far above, it is
# no acquire's (a claim of 4294967295 would end the numbering): left out. Wider than the tries an
# acquire makes, so that racing acquires' claims are always counted.
PLAUSIBLE_CLAIMS = 10 * MAX_CLAIM_TRIES


def numbering(client: Client) -> tuple[int, list[int]]:
    """The next unused scan number and the claims left out of it (ascending).

    Counted: every scan that ran or was requested (any key of it but ``claim`` and ``abort``: an
    abort alone names no scan, ``sectorflow abort`` refuses one never requested), and the claims at
    most PLAUSIBLE_CLAIMS above the highest of those. Scans given with --scan-number count whatever
    their number, by their request. Why not every claim: a claim is the one key an acquire writes
    before anything is known of the scan, so one far above the scans says nothing of them.
    """
    acquired: set[int] = set()
    claimed: set[int] = set()
    for key in client.subtree(SCANS_PREFIX):
        parts = key.split("/")
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        if parts[2] == "claim":
            claimed.add(int(parts[1]))
        elif parts[2] != "abort":
            acquired.add(int(parts[1]))
    highest = max(acquired, default=0)
    plausible = [n for n in claimed if n <= highest + PLAUSIBLE_CLAIMS]
    odd = sorted(n for n in claimed if n > highest + PLAUSIBLE_CLAIMS)
    return max([highest, *plausible]) + 1, odd


def next_unused_scan(client: Client) -> int:
    """One above the highest scan number the kvstore holds records of (odd claims left out: ``numbering``)."""
    return numbering(client)[0]


def wait_for_account(client: Client, published: PublishedRequest, timeout_s: float | None) -> ScanAccount:
    """Waits until the scan is over (``scan_account.account`` says so) and returns its account.

    Over means: every producer thread ended its part and, for a streamed scan, the file record came or
    every NodeGroup of the routing left the kvstore (then no file will come: failed). Until every
    producer thread took the request it is re-published after a kvstore restart. The stamps that tell
    this run's records from an earlier run's come from the producers' clocks (NTP assumed). After
    ``timeout_s`` the account so far is returned (outcome pending).
    """
    scan = published.request.scan_number
    routing = set(published.request.routing or [])
    result = account(published.records(client))
    waiting: list[str] = []
    nodegroups_absent, producers_absent = Absences(published.gone_after_s), Absences(published.gone_after_s)
    warned: set[str] = set()  # producer threads whose death was logged

    def over() -> bool:
        nonlocal result, waiting
        records = published.records(client)
        waiting = published.not_taken(records)
        if waiting:
            published.republish_if_lost(client)
        registered = {record.uid for record in client.nodegroups()}
        # A producer daemon's status is its client's own key: it goes when the daemon dies.
        statuses = {name: status for (_, name), status in client.statuses(SERVICE_PRODUCER).items()}
        threads = [f"r{r}t{t}" for r, count in enumerate(published.record.producer_threads) for t in range(count)]
        gone = nodegroups_absent.lasting({"nodegroups"} if routing and not routing & registered else set())
        dead = producers_absent.lasting({name for name in threads if name not in statuses})
        result = account(records, nodegroups_gone=bool(gone),
                         producers_gone=abandoned_producers(records, statuses, wall_clock_s(), absent=dead),
                         full=kvstore_full(client.get(status_key("kvstore", "server"))))
        if set(result.died) - warned:
            warned.update(result.died)
            # Not only in the account at the end: the file waits until the NodeGroups close the port too.
            log.warning("%s; the NodeGroups close its port once they find it gone too ([nodegroup] "
                        "scan_timeout_s after its last sector at the latest)", result.died_line())
        return result.outcome != PENDING

    shown = ScanProgress(sys.stderr)

    def progress(elapsed_s: float) -> None:
        # The producers' records carry their progress (every 500 ms at most): over() just read them.
        # Threads that have not taken the request are named once they had as long as without --wait.
        shown.show(result, waiting if elapsed_s >= ACK_WAIT_S else None)

    try:
        # Polling the replica, which the kvstore agent keeps current.
        wait_until(over, timeout_s, f"scan {scan}", POLL_S, on_poll=progress)
        shown.finish(result)
    except WaitTimeout:
        waiting = published.not_taken(published.records(client))
        print(f"scan {scan}: not over after {timeout_s:g} s"
              + (f"; not taken by {', '.join(waiting)}" if waiting else ""), file=sys.stderr, flush=True)
    return result
