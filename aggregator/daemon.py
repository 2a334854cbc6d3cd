"""The aggregator as a daemon: run the C++ relay threads, publish their status, stop on a signal.

The relay threads run in C++ without the GIL; the main thread waits for SIGTERM/SIGINT (Python
runs signal handlers only there) and, every report period, reads the counters and publishes
``status/aggregator/t<r>`` (``ServiceStatus``: state idle or streaming, scan, messages, bytes and
the extra fields ``malformed`` (all kinds), ``malformed_<kind>`` per kind of refusal, ``lost``,
``lost_last_scan``, ``dead_nodegroups``, ``recovered_scans``, ``native_scans``, ``infos``, ``open_scans``,
``evicted_scans``, who runs it (``host``, ``pid``) and, once a NodeGroup registration did not decode,
``bad_records``). A finished
scan is published at once and logged as one summary line per thread; a NodeGroup declared dead for
a scan and a scan rebuilt from the producers' records after a restart are logged as warnings when
they happen. A malformed kind is logged once, when it first occurs. The relay threads themselves
write each scan's relay record (``scans/<n>/aggregator/t<r>``, the C++ RecordStore).

An aggregator that finds another process's relay threads live in the kvstore
(``sectorflow.ownership``) stops before relaying, with one line naming that process's host and pid.
With ``[aggregator] standby_host`` set, the kvstore's lease decides instead (``lease.py``): the
daemon waits as a standby (``status/aggregator/standby-<host>-<pid>``) until the lease is free, takes
it, binds (retrying while the ports are still held by the old active), waits for its relay's kvstore
replicas (which start at the server its own client found active) and relays, renewing the lease all
the while; it stops relaying and waits again when the lease is lost, and gives it up when it stops. A takeover mid-scan is a
restart of the relay threads as far as the scan goes: they rebuild the scan from the producers'
records, as a restarted aggregator does. With an aggregation tier each member holds its own lease
and the one standby takes whichever falls free: it then relays that member's slice, on that
member's ports and with that member's key pair, as that member restarted on the standby's host.

States (the one state machine, sectorflow.service), logged on every transition: the daemon starts
(binds, then waits up to SYNC_TIMEOUT_S for its kvstore replicas, so that a relay restarted
mid-scan finds the producers' scan records at once; without them it relays anyway), serves (idle),
stops; each thread is idle or streaming while it serves, and takes the daemon's
state (stopping, stopped) when it stops; each thread's state is published in its status.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from sectorflow._core.aggregator import Aggregator, AggregatorError, RelayStats, ScanSummary
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.protocol import (
    SERVICE_AGGREGATOR,
    STATE_IDLE,
    STATE_STOPPED,
    STATE_STOPPING,
    STATE_STREAMING,
    ServiceStatus,
    refusal_fields,
    status_key,
)
from sectorflow.ownership import owner_fields, refuse_if_running
from sectorflow.protocol.scan_parts import relay_thread
from sectorflow.security.options import aggregator_key_name
from sectorflow.service import ServiceState, stop_on_signals
from sectorflow.waiting import WaitTimeout, wait_until

from .lease import LEASE_KEY, Lease, lease_key, standby_name
from .options import aggregator_options

logger = logging.getLogger(__name__)

# How often the main thread collects finished scans (seconds); statuses go out at least every
# kvstore heartbeat and at once when a scan ends.
POLL_INTERVAL_S = 0.1
# How long the daemon, starting, waits for its kvstore replicas before it relays anyway: a relay
# restarted mid-scan must find the producers' scan records in its first lookup.
SYNC_TIMEOUT_S = 30.0


@dataclass
class _ThreadView:
    """What the daemon last published and logged about one relay thread."""

    thread: int
    state: ServiceState
    # The relay thread's index in the tier (member * receivers + thread): its status key t<slot>.
    slot: int = 0
    published: tuple = ()
    logged_kinds: set[str] = field(default_factory=set)
    lost_last_scan: int = 0


def thread_status(stats: RelayStats, lost_last_scan: int, bad_records: int = 0,
                  unauthenticated: int | None = None) -> ServiceStatus:
    """The ``status/aggregator/t<r>`` record of one relay thread's counters.

    ``unauthenticated``: with [security] on, the peers the aggregator refused at the CURVE handshake
    (the aggregator's count, not the thread's: every thread's status shows it).
    """
    extra: dict[str, int | str] = dict(refusal_fields(stats.malformed))
    extra["lost"] = int(stats.lost)
    extra["lost_last_scan"] = int(lost_last_scan)
    extra["dead_nodegroups"] = int(stats.dead)
    extra["recovered_scans"] = int(stats.recovered_scans)
    extra["native_scans"] = int(stats.native_scans)
    extra["infos"] = int(stats.infos)
    extra["open_scans"] = int(stats.open_scans)
    extra["evicted_scans"] = int(stats.evicted_scans)
    extra.update(owner_fields())
    if bad_records:
        extra["bad_records"] = int(bad_records)
    if unauthenticated is not None:
        extra["unauthenticated"] = int(unauthenticated)
    return ServiceStatus(
        state=STATE_STREAMING if stats.streaming else STATE_IDLE,
        scan=stats.scan,
        messages=stats.messages,
        bytes=stats.bytes,
        extra=extra,
    )


def summary_line(summary: ScanSummary) -> str:
    """One log line for one scan of one thread: counts per NodeGroup, loss, rate, the dead NodeGroups.

    An interim report (a NodeGroup declared dead, a scan rebuilt after a restart) is its note.
    """
    if not summary.closed:
        return f"scan {summary.scan}: thread {summary.thread} {summary.note}"
    rate = summary.bytes / summary.seconds / 1e9 if summary.seconds > 0 else 0.0
    per_uid = ", ".join(f"{uid} {count}" for uid, count in summary.counts.items())
    text = (
        f"scan {summary.scan}: thread {summary.thread} {'finished' if summary.complete else 'closed UNFINISHED'}: "
        f"forwarded {summary.forwarded} of {summary.expected} expected messages ({per_uid}), "
        f"{summary.bytes} bytes in {summary.seconds:.3f} s ({rate:.2f} GB/s), lost {summary.lost}"
    )
    if summary.lost_by_uid:
        text += " (" + ", ".join(f"{uid} {n}" for uid, n in summary.lost_by_uid.items()) + ")"
    if summary.dead:
        text += "; dead: " + ", ".join(summary.dead)
    if summary.recovered:
        text += "; rebuilt from the producers' scan records after a restart"
    if summary.note:
        text += f"; {summary.note}"
    return text


def run_aggregator(config: Config, standby: bool = False, member: int = 0) -> int:
    """Run the aggregator of ``config`` until SIGTERM or SIGINT; returns the exit code 0.

    With ``[aggregator] standby_host`` set, it relays only while it holds the lease
    (``sectorflow.aggregator.lease``; with a tier, member ``member``'s) and waits as a standby
    otherwise; ``standby`` lets the other aggregators take their leases first when they start
    together, and then takes whichever member's lease falls free (``member`` is not used).

    Raises:
        SectorflowError: a port cannot be bound (the message names the address), a relay thread
            failed, or ``standby`` without a standby_host configured.
    """
    if config.aggregator.standby_host:
        return _run_with_lease(config, standby, member)
    if standby:
        raise SectorflowError(f"--standby: {config.source} configures no standby ([aggregator] standby_host is empty): "
                              "set it to the standby's address")
    state = ServiceState(logger)
    options = aggregator_options(config, log=lambda message: logger.info("kvstore replica: %s", message),
                                 member=member)
    slots = {f"t{relay_thread(member, r, config.n_receivers)}" for r in range(config.n_receivers)}
    aggregator = Aggregator(options)  # AggregatorError (a SectorflowError) names the address
    failure = ""
    try:
        with stop_on_signals(logger) as stop, _status_client(config, member) as client:
            # Bound but not relaying yet: an aggregator of this stack that runs elsewhere keeps it (a
            # kvstore that answers the relays' replicas answers this client at once).
            if _wait_synced(aggregator, config, stop) and client.wait_synced(SYNC_TIMEOUT_S):
                # Another member of the tier runs beside it: only this member's relay threads are its.
                _refuse_if_member_runs(config, member, slots)
            failure = _serve(aggregator, client, config, state, stop)
    finally:
        aggregator.stop()
    _log_totals(aggregator)
    if failure:
        raise SectorflowError(failure)
    return 0


def _status_client(config: Config, member: int = 0, subtree: str = LEASE_KEY) -> Client:
    """The client a member publishes its relay threads' statuses with. Its replica holds the leases
    (LEASE_KEY is the prefix of every member's) and nothing else it does not read: with every relay
    thread's status in it, each member of a tier of k took in the k x R statuses that change ten
    times a second while streaming, work that grew with k (BENCHMARKS.md, "tier")."""
    return Client.from_config(config, subtree=subtree, name="aggregator", role="aggregator",
                              key_name=aggregator_key_name(config, member))


def _refuse_if_member_runs(config: Config, member: int, slots: set[str]) -> None:
    """Raise SectorflowError if another process publishes a live status of this member's relay threads."""
    with _status_client(config, member, subtree=f"status/{SERVICE_AGGREGATOR}/") as client:
        if client.wait_synced(SYNC_TIMEOUT_S):
            refuse_if_running(client.statuses(SERVICE_AGGREGATOR), lambda name, _status: name in slots,
                              f"aggregator member {member}", stack=client.stack_id)


def _run_with_lease(config: Config, standby: bool, member: int) -> int:
    """Wait as a standby until a lease this process may take is free, take it, relay that member's
    slice while it holds it; again after losing it. A member process may take its own member's lease
    only (producers reach it at its host and the standby's); the standby, any member's."""
    failure = ""
    members = len(config.aggregator.hosts)
    with stop_on_signals(logger) as stop, _status_client(config, member) as client:
        period_s = config.aggregator.takeover_s
        leases = [Lease(client, period_s, lease_key(members, i)) for i in (range(members) if standby else [member])]
        if not client.wait_synced(SYNC_TIMEOUT_S):
            logger.warning("kvstore at %s did not answer within %.0f s: waiting for it as a standby",
                           config.kvstore.address, SYNC_TIMEOUT_S)
        if standby:
            _wait_for_active(leases, stop)
        while not stop.is_set():
            lease = _stand_by(client, config, leases, stop)
            if lease is None:
                break
            held = leases.index(lease) if standby else member
            record = lease.current()
            logger.info("took the lease %s (takeovers %s): binding and relaying%s", lease.key,
                        record.extra.get("takeovers") if record is not None else "?",
                        f" member {held}'s slice of the tier" if members > 1 else "")
            # The relay's replicas start at the kvstore server this client found active (a pair just
            # failed over: not a silence period at the dead primary while the lease waits).
            aggregator = _bind_when_free(config, lease, stop, client.server if config.kvstore.servers else "", held)
            if aggregator is None:
                continue
            try:
                _wait_synced(aggregator, config, stop, lease)
                why = lease.keep()
                failure = LOST + why if why else _serve(aggregator, client, config, ServiceState(logger), stop, lease)
                if why:
                    logger.warning("%s", why)
            finally:
                aggregator.stop()
            _log_totals(aggregator)
            if not failure.startswith(LOST):
                break
            failure = ""
        for lease in leases:
            lease.release()  # stopped, or a relay thread failed: a standby takes over at once
    if failure:
        raise SectorflowError(failure)
    return 0


def _wait_for_active(leases: list[Lease], stop: threading.Event) -> None:
    """Started as the standby: give the aggregators started alongside one lease period to take their leases."""
    period_s = leases[0].period_s
    try:
        wait_until(lambda: all(lease.current() is not None for lease in leases), period_s,
                   "the active aggregators", POLL_INTERVAL_S, stop=stop)
    except WaitTimeout:
        logger.info("a lease was still free after takeover_s (%g s): this standby takes it", period_s)


def _stand_by(client: Client, config: Config, leases: list[Lease], stop: threading.Event) -> Lease | None:
    """Publish this standby's status until one of ``leases`` is free and this process takes it (the
    lowest member first); None on stop."""
    name = standby_name()
    key = status_key(SERVICE_AGGREGATOR, name)
    announced = False
    while not stop.is_set():
        records = [lease.current() for lease in leases]
        if client.synced():
            for lease, record in zip(leases, records, strict=True):
                if record is None and lease.take():
                    if announced:
                        client.erase(key)
                    return lease
        if not announced:
            holders = ", ".join(f"{lease.key} {_holder_of(record)}" for lease, record in zip(leases, records, strict=True))
            logger.info("standby: %s; taking over once a lease is not renewed for %g s", holders, leases[0].period_s)
            extra: dict[str, int | str] = dict(owner_fields())
            extra["standby"] = 1
            client.set(key, ServiceStatus(state=STATE_IDLE, scan=0, messages=0, bytes=0, extra=extra).encode(),
                       config.kvstore.ttl_s)
            announced = True
        stop.wait(POLL_INTERVAL_S)
    if announced:
        client.erase(key)
    return None


def _holder_of(record: ServiceStatus | None) -> str:
    return f"held by {record.extra.get('host')} pid {record.extra.get('pid')}" if record else "held by nobody yet"


def _bind_when_free(config: Config, lease: Lease, stop: threading.Event, first_server: str,
                    member: int) -> Aggregator | None:
    """Member ``member``'s relay, bound; retried while its ports are taken (the old active, fenced,
    still unbinding) and the lease is kept. None if the lease was lost or the daemon stops first."""
    options = aggregator_options(config, log=lambda message: logger.info("kvstore replica: %s", message),
                                 first_server=first_server, member=member)
    logged = False
    while not stop.is_set():
        try:
            return Aggregator(options)
        except AggregatorError as error:
            if not logged:
                logger.warning("%s: retrying while the lease is held", error)
                logged = True
        why = lease.keep()
        if why:
            logger.warning("%s", why)
            return None
        stop.wait(POLL_INTERVAL_S)
    return None


# A failure that ends one term of relaying, not the daemon: the lease went to another process.
LOST = "lease lost: "


def _serve(aggregator: Aggregator, client: Client, config: Config, state: ServiceState, stop: threading.Event,
           lease: Lease | None = None) -> str:
    """Relay until ``stop`` (or, with a lease, until it is lost); returns a relay thread's failure, a
    lost lease (LOST + why), or "". The aggregator is stopped and its final statuses published."""
    base = aggregator.member * aggregator.threads()
    views = [_ThreadView(r, ServiceState(logger, name=f"thread {base + r}"), base + r)
             for r in range(aggregator.threads())]
    heartbeat_s = config.kvstore.heartbeat_ms / 1000
    failure = ""
    aggregator.start()
    for r in range(aggregator.threads()):
        logger.info("thread %d: pulling on %s from %d producer thread(s)", r, aggregator.endpoint(r),
                    config.receivers[r].threads)
    state.enter(STATE_IDLE)
    for view in views:
        # Serving: from here a thread is idle or streaming (a scan may already be open, say
        # rebuilt after a restart, and starting leads only to idle).
        view.state.enter(STATE_IDLE)
    since_publish = 0.0
    first_routed: dict[str, float] = {}
    while not stop.wait(POLL_INTERVAL_S):
        since_publish += POLL_INTERVAL_S
        finished = _collect(aggregator, views)
        force = since_publish >= heartbeat_s
        _publish(aggregator, views, client, config, state.state, force=force or finished)
        if force:
            since_publish = 0.0
        for line in aggregator.take_security_refusals():
            logger.warning("%s", line)
        failure = aggregator.failure()
        if failure:
            break
        if lease is not None:
            stats = [aggregator.stats(view.thread) for view in views]
            if not first_routed and any(s.messages for s in stats):
                # The failover benchmark's end mark: this term's first sector routed (to POLL_INTERVAL_S).
                first_routed["first_routed_s"] = time.time()
            why = lease.keep(any(s.streaming for s in stats), **first_routed)
            if why:
                logger.warning("%s", why)
                failure = LOST + why
                break
    state.enter(STATE_STOPPING)
    _publish(aggregator, views, client, config, state.state, force=True)
    aggregator.stop()
    _collect(aggregator, views)
    state.enter(STATE_STOPPED)
    _publish(aggregator, views, client, config, state.state, force=True)  # the last word: final counters
    return failure


def _log_totals(aggregator: Aggregator) -> None:
    for thread in range(aggregator.threads()):
        stats = aggregator.stats(thread)
        logger.info("thread %d: forwarded %d messages (%d bytes), lost %d, malformed %d", thread,
                    stats.messages, stats.bytes, stats.lost, sum(stats.malformed.values()))


def _wait_synced(aggregator: Aggregator, config: Config, stop: threading.Event, lease: Lease | None = None) -> bool:
    """Wait for the replicas of nodegroups/ and scans/; without them after SYNC_TIMEOUT_S, relay anyway.
    Returns whether they synced. A ``lease`` held is renewed meanwhile, and the wait ends if it is lost
    (the caller asks it why)."""
    kv = config.kvstore

    def synced() -> bool:
        # Each poll blocks in C++ for up to POLL_INTERVAL_S; a stop ends the wait between two.
        if aggregator.wait_synced(POLL_INTERVAL_S):
            return True
        return lease is not None and bool(lease.keep())

    try:
        wait_until(synced, SYNC_TIMEOUT_S, f"kvstore at {kv.address}", 0.0, stop=stop)
        return not stop.is_set()
    except WaitTimeout:
        logger.warning("kvstore at %s did not answer within %.0f s: relaying anyway; NodeGroups and scan records "
                       "are found once it answers", kv.address, SYNC_TIMEOUT_S)
        return False


def _collect(aggregator: Aggregator, views: list[_ThreadView]) -> bool:
    """Log the scans that ended; returns True if any did."""
    summaries = aggregator.take_summaries()
    for summary in summaries:
        clean = summary.closed and summary.complete and summary.lost == 0 and not summary.dead
        (logger.info if clean else logger.warning)("%s", summary_line(summary))
        if summary.closed:
            views[summary.thread].lost_last_scan = summary.lost
    return bool(summaries)


def _publish(aggregator: Aggregator, views: list[_ThreadView], client: Client, config: Config, daemon_state: str,
             force: bool) -> None:
    """Publish each thread's status if it changed (or ``force``); log state changes and new malformed kinds.

    A thread is idle or streaming while the daemon serves; while the daemon stops, its state is the
    daemon's.
    """
    for view in views:
        stats = aggregator.stats(view.thread)
        refused = aggregator.zap_stats().refused if config.security.enabled else None
        status = thread_status(stats, view.lost_last_scan, aggregator.bad_records(), refused)
        # Which member of the aggregation tier, and which receiver: t<j> names relay thread j of the tier.
        status.extra["member"], status.extra["receiver"] = aggregator.member, view.thread
        if daemon_state in (STATE_STOPPING, STATE_STOPPED):
            status.state = daemon_state
        view.state.enter(status.state, why=f"scan {stats.scan}")
        for kind, what in stats.first_malformed.items():
            if kind not in view.logged_kinds:
                view.logged_kinds.add(kind)
                logger.warning("thread %d: dropped a malformed message (%s): %s; further ones of this kind are "
                               "only counted (status/aggregator/t%d malformed_%s)", view.slot, kind, what,
                               view.slot, kind)
        fingerprint = (status.state, status.scan, status.messages, status.bytes, tuple(sorted(status.extra.items())))
        if force or fingerprint != view.published:
            client.set(status_key(SERVICE_AGGREGATOR, f"t{view.slot}"), status.encode(), config.kvstore.ttl_s)
            view.published = fingerprint
