"""What the page shows, computed from a kvstore replica's content: one JSON-ready dict per update.

Pure reading: the services' statuses (``status/...``), the registered NodeGroups (``nodegroups/``),
the acquire request and the scans' records (``scans/<n>/...``, accounted by
``sectorflow.operations.scan_account``), plus what the dashboard remembers between updates (rates, NodeGroups
seen) to tell a NodeGroup that left from one that was lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sectorflow._core import protocol as _records
from sectorflow.aggregator.lease import describe as describe_aggregators
from sectorflow.configs import Config
from sectorflow.kvstore.status_records import StatusEntry, describe_pair, status_entries
from sectorflow._core.kvstore import REFUSAL_KINDS as KVSTORE_REFUSAL_KINDS
from sectorflow.protocol import SERVICE_LIBERTEM
from sectorflow.protocol.refusals import TOTAL_FIELD as REFUSED_FIELD
from sectorflow.operations.progress import ReceiverRates
from sectorflow.operations.scan_account import (ABORTED, COMPLETE, PENDING, abandoned_producers, account,
                                                bridge_last_scan, records_of)

from .rates import Rates
from .scan_groups import ScanGroups
from .tier import tier_members

# A status this old (seconds) is from a service that is not moving: its rates are 0.
STALE_S = 3.0
# Counters of a NodeGroup that are queue depths: what waits in its frame pool.
QUEUE_FIELDS = ("pool_slots_in_use", "pool_bytes")


@dataclass
class Remembered:
    """What one update leaves for the next."""

    rates: Rates = field(default_factory=lambda: Rates(STALE_S))
    nodegroups: dict[str, str] = field(default_factory=dict)  # uid -> last status seen while registered
    lost: dict[str, float] = field(default_factory=dict)      # uid -> when it was found gone without stopping
    producers: dict[str, str] = field(default_factory=dict)   # thread (r<R>t<T>) -> its last state seen
    producers_lost: dict[str, float] = field(default_factory=dict)  # thread -> when its status went without a stop
    # scan -> (its keys, NodeGroups gone, producer threads gone, records, account): a scan whose records
    # did not change is not decoded and accounted again (most listed scans are over).
    accounts: dict[int, tuple[Mapping[str, bytes], bool, frozenset[tuple[int, int]], Any, Any]] = field(
        default_factory=dict)
    # scan -> its receivers' rates (acquire --wait's arithmetic), while the scan is in progress
    progress: dict[int, ReceiverRates] = field(default_factory=dict)
    # alert id -> when it was first raised (Unix seconds); an alert no longer raised is forgotten
    alerts_since: dict[str, float] = field(default_factory=dict)


def build_view(groups: ScanGroups, now_s: float, memory: Remembered, *, reachable: bool,
               address: str, sequence: int, recent_scans: int, config: str = "", stack: str = "",
               beamline: Config | None = None) -> dict[str, Any]:
    """The page's state from ``groups`` (a replica's content, grouped by scan) at ``now_s`` (Unix seconds).

    ``config``: the configuration file, for a scan on disk's replay command (``scan_account.config_argument``).
    ``stack``: the kvstore's stack id ("" while unknown; kvstore/SPEC.md, "The stack's identity").
    ``beamline``: the loaded configuration, for the aggregation tier's members (None: no tier shown).
    """
    others, by_scan = groups.others, groups.scans
    statuses = list(status_entries(others))
    services = _services(statuses, now_s, memory.rates)
    nodegroups = _nodegroups(others)
    producers = {entry.name: entry.status for entry in statuses
                 if entry.service == _records.SERVICE_PRODUCER and entry.status is not None}
    scans = _scans(by_scan, {ng["uid"] for ng in nodegroups}, producers, memory, now_s, config)
    _aborted_not_failed(services, scans)
    alerts = _stamped(_alerts(services, nodegroups, scans, memory, now_s, reachable), memory, now_s, reachable)
    current = scans[-1] if scans else None
    relay = [s for s in services if s["service"] == _records.SERVICE_AGGREGATOR]
    counting = [s for s in services if s["service"] == _records.SERVICE_NODEGROUP]
    aggregators = {(entry.service, entry.name): entry.status for entry in statuses
                   if entry.service == _records.SERVICE_AGGREGATOR and entry.status is not None}
    return {
        "kvstore": {"address": address, "reachable": reachable, "sequence": sequence, "stack": stack},
        # Which kvstore server and which aggregator are active, and the failovers counted, in the
        # words of 'sectorflow status' (empty for a single server and an aggregator with no standby).
        "failover": [line for line in (describe_pair(others), describe_aggregators(others)) if line],
        "now_s": now_s,
        "services": services,
        "nodegroups": nodegroups,
        "rates": {
            "bytes_per_s": sum(s["bytes_per_s"] for s in relay),
            "messages_per_s": sum(s["messages_per_s"] for s in relay),
            "frames_per_s": sum(s["frames_per_s"] for s in counting),
        },
        "queues": [{"name": s["name"], **{k: s["extra"].get(k, 0) for k in QUEUE_FIELDS}} for s in counting],
        "refused": sum(s["refused"] for s in services),
        "scan": current,
        "recent": list(reversed(scans[-recent_scans:])),
        "libertem": _bridges(services),
        "alerts": alerts,
        # Each member of an aggregation tier: its slice, rate and health ([] without a tier).
        "tier": tier_members(beamline, aggregators, services, current) if beamline is not None else [],
    }


def _services(statuses: list[StatusEntry], now_s: float, rates: Rates) -> list[dict[str, Any]]:
    rows = []
    for key, service, name, status, error in statuses:
        if status is None:
            rows.append({"service": key, "name": "", "state": "invalid", "error": error, "scan": 0,
                         "messages": 0, "bytes": 0, "age_s": 0.0, "refused": 0, "refused_kinds": {}, "extra": {},
                         "bytes_per_s": 0.0, "messages_per_s": 0.0, "frames_per_s": 0.0})
            continue
        source = f"{service}/{name}"
        extra = dict(status.extra)
        frames = int(extra.get("frames_complete", 0)) + int(extra.get("frames_incomplete", 0))
        for counter, value in (("messages", status.messages), ("bytes", status.bytes), ("frames", frames)):
            rates.observe(source, counter, status.updated_s, value)
        prefix = f"{REFUSED_FIELD}_"
        kinds = {k[len(prefix):]: v for k, v in extra.items() if k.startswith(prefix) and v}
        if service == _records.SERVICE_KVSTORE:
            kinds = {kind: extra[kind] for kind in KVSTORE_REFUSAL_KINDS if extra.get(kind)}
        rows.append({
            "service": service, "name": name, "state": status.state, "scan": status.scan,
            "messages": status.messages, "bytes": status.bytes, "age_s": max(0.0, now_s - status.updated_s),
            "refused": int(extra.get(REFUSED_FIELD, 0)) if service != _records.SERVICE_KVSTORE else sum(kinds.values()),
            "refused_kinds": kinds,
            "extra": {k: v for k, v in extra.items() if not k.startswith(REFUSED_FIELD)},
            "bytes_per_s": rates.rate(source, "bytes", now_s),
            "messages_per_s": rates.rate(source, "messages", now_s),
            "frames_per_s": rates.rate(source, "frames", now_s),
        })
    rates.forget_except({f"{row['service']}/{row['name']}" for row in rows})
    return rows


# A LiberTEM bridge's counters the page shows (libertem_bridge/SPEC.md, "Status").
BRIDGE_FIELDS = ("positions_sent", "frames_sent", "positions_empty", "frames_late", "frames_dropped", "frames_unsent",
                 "clients_dropped", "clients_gone", "clients_refused", "scans_served", "scans_unserved")


def _aborted_not_failed(services: list[dict[str, Any]], scans: list[dict[str, Any]]) -> None:
    """A service in state error over a scan an operator aborted did what the abort asked (a producer
    thread stops with the error "the scan was aborted"): it is shown as ``aborted``, no error alert."""
    aborted = {scan["scan"] for scan in scans if scan["outcome"] == ABORTED}
    for service in services:
        if service["state"] == _records.STATE_ERROR and service["scan"] in aborted:
            service["state"] = ABORTED


def _bridges(services: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The LiberTEM bridges (``status/libertem/<name>``): where each listens, whether a LiberTEM client
    is connected, what it did, and its last scan in the words ``acquire --wait`` prints."""
    bridges = []
    for service in services:
        if service["service"] != SERVICE_LIBERTEM:
            continue
        extra = service["extra"]
        bridges.append({
            "name": service["name"], "state": service["state"], "age_s": service["age_s"],
            "listen": str(extra.get("listen", "")), "client_connected": bool(extra.get("client_connected")),
            "last_scan": extra.get("last_scan"),
            "last": f"scan {extra['last_scan']}: {bridge_last_scan(extra)}" if "last_scan" in extra else "",
            **{name: int(extra.get(name, 0)) for name in BRIDGE_FIELDS},
        })
    return bridges


def _nodegroups(entries: Mapping[str, bytes]) -> list[dict[str, Any]]:
    listing = _records.nodegroups_from({k: v for k, v in entries.items() if k.startswith(_records.NODEGROUPS_PREFIX)})
    return [{"uid": r.uid, "host": r.host, "ports": list(r.ports), "node": r.node, "rank": r.rank,
             "status": r.status} for r in listing.records]


def _scans(by_scan: Mapping[int, Mapping[str, bytes]], registered: set[str],
           producers: Mapping[str, _records.ServiceStatus], memory: Remembered, now_s: float,
           config: str = "") -> list[dict[str, Any]]:
    """Every scan with records, oldest request first, with its account, its times and, per receiver,
    the sectors moved, the rate and the time left (``operations.progress``, as ``acquire --wait`` shows
    them). The sectors' fates are the account's words, as ``acquire --wait`` and ``status`` print
    them: counted, spilled (a fault), on disk (no NodeGroup, as planned), pending (the scan still
    runs), missing."""
    scans = []
    memory.accounts = {scan: memory.accounts[scan] for scan in by_scan if scan in memory.accounts}
    for scan, keys in sorted(by_scan.items()):
        records, result = _account(scan, keys, registered, producers, memory, now_s)
        request = records.request
        in_progress = result.outcome == PENDING
        rates = memory.progress.setdefault(scan, ReceiverRates()) if in_progress else None
        if rates is not None:
            rates.note(result, now_s)
        receivers = [{"receiver": r.receiver, "done": min(r.moved, r.sectors), "total": r.sectors,
                      "rate_per_s": rates.rate(r.receiver) if rates else 0.0,
                      "left_s": rates.time_left_s(r) if rates else 0.0} for r in result.receivers]
        lefts = [r["left_s"] for r in receivers]
        started_s = request.requested_s if request is not None else 0.0
        # The scan ends when its producer threads have (or died): the last record is written then.
        ended_s = 0.0 if in_progress else max((part.updated_s for part in records.producers.values()), default=0.0)
        written_s = records.file.written_s if records.file is not None else 0.0
        end_s = now_s if in_progress else ended_s  # a running scan's duration so far
        scans.append({
            "scan": scan,
            "requested_s": started_s,
            "duration_s": end_s - started_s if started_s and end_s else None,
            "to_file_s": written_s - started_s if written_s and started_s else None,
            "shape": [request.scan_x, request.scan_y] if request is not None else None,
            "source": request.source if request is not None else "",
            "routing": list(request.routing) if request is not None else [],
            "tier": list(request.tier) if request is not None else [],  # the aggregation tier's members it goes through
            "outcome": result.outcome,
            "in_progress": in_progress,
            "counted": result.counted, "spilled": result.spilled, "on_disk": result.on_disk,
            "pending": result.pending, "missing": result.missing, "sent": result.sent,
            "planned_on_disk": result.planned_on_disk,
            "sectors": result.sectors,
            "line": result.line(config),
            "replay": result.replay_command(config) if result.replayable else "",
            "path": result.path,
            "notes": result.notes + [line.strip() for line in result.breakdown()
                                     if result.missing and line.strip().startswith("receiver")],
            "receivers": receivers,
            "rate_per_s": sum(r["rate_per_s"] for r in receivers),
            # The scan's time left is its slowest receiver's; unknown while any receiver's is.
            "left_s": None if None in lefts else max(lefts, default=0.0),
            # The known quantities as the file records them ({quantity: {value, units, source}}).
            "instrument": records.instrument.known() if records.instrument is not None else {},
            "invalid_records": len(records.rejected),
            "died": result.died_line(),
        })
    memory.progress = {scan["scan"]: memory.progress[scan["scan"]] for scan in scans
                       if scan["in_progress"] and scan["scan"] in memory.progress}
    scans.sort(key=lambda s: (s["requested_s"], s["scan"]))
    return scans


def _account(scan: int, keys: Mapping[str, bytes], registered: set[str], producers: Mapping[str, _records.ServiceStatus],
             memory: Remembered, now_s: float) -> tuple[Any, Any]:
    """The scan's records and account, from the last update's if neither its keys nor the NodeGroups
    and producer threads gone changed (a thread no daemon works on ends its part where its record stopped)."""
    cached = memory.accounts.get(scan)
    if cached is not None and cached[0] == keys:
        records = cached[3]
        request = records.request
        routing = set(request.routing) if request is not None else set()
        if ((bool(routing) and not routing & registered) == cached[1]
                and abandoned_producers(records, producers, now_s) == cached[2]):
            return records, cached[4]
    records = records_of(keys, scan)
    routing = set(records.request.routing) if records.request is not None else set()
    gone = bool(routing) and not routing & registered
    dead = frozenset(abandoned_producers(records, producers, now_s))
    result = account(records, nodegroups_gone=gone, producers_gone=dead)
    memory.accounts[scan] = (dict(keys), gone, dead, records, result)
    return records, result


def _alerts(services: list[dict[str, Any]], nodegroups: list[dict[str, Any]], scans: list[dict[str, Any]],
            memory: Remembered, now_s: float, reachable: bool) -> list[dict[str, Any]]:
    alerts = []
    if not reachable:
        alerts.append({"id": "kvstore-unreachable", "level": "error",
                       "text": "kvstore unreachable: showing the last known state; the dashboard reconnects by itself"})
        return alerts  # a replica that is not live says nothing about who left
    registered = {ng["uid"]: ng["status"] for ng in nodegroups}
    if not registered:
        alerts.append({"id": "no-nodegroup", "level": "warning",
                       "text": "no NodeGroup is registered: a scan acquired now is written to disk, not counted "
                               "(start the NodeGroups: 'sectorflow up', or a streaming session)"})
    for uid, last in memory.nodegroups.items():
        if uid not in registered and last not in (_records.STATE_STOPPING, _records.STATE_STOPPED):
            memory.lost.setdefault(uid, now_s)
    for uid in registered:
        memory.lost.pop(uid, None)
    memory.nodegroups = registered
    for uid, since in sorted(memory.lost.items()):
        alerts.append({"id": f"nodegroup-lost/{uid}", "level": "error",
                       "text": f"NodeGroup {uid} lost: its registration expired without a stop ({now_s - since:.0f} s ago)"})
    producers = {s["name"]: s["state"] for s in services if s["service"] == _records.SERVICE_PRODUCER}
    for name, last in memory.producers.items():
        if name not in producers and last not in (_records.STATE_STOPPING, _records.STATE_STOPPED):
            memory.producers_lost.setdefault(name, now_s)
    memory.producers_lost = {name: since for name, since in memory.producers_lost.items() if name not in producers}
    memory.producers = producers
    for name, since in sorted(memory.producers_lost.items()):
        alerts.append({"id": f"producer-lost/{name}", "level": "error",
                       "text": f"producer {name} lost: its status expired without a stop ({now_s - since:.0f} s ago); "
                               "its receiver streams nothing until its daemon runs again"})
    for service in services:
        extra = service["extra"]
        if service["service"] == _records.SERVICE_PRODUCER and (
                service["state"] == _records.STATE_WRITING_TO_DISK
                or (extra.get("mode") == "fallback" and service["state"] != _records.STATE_IDLE)):
            alerts.append({"id": f"fallback/{service['name']}/{service['scan']}", "level": "warning",
                           "text": f"producer {service['name']} is writing scan {service['scan']} to disk (fallback) "
                                   f"in {extra.get('fallback_dir', '?')}"})
        if service["service"] == _records.SERVICE_AGGREGATOR and extra.get("lost_last_scan"):
            alerts.append({"id": f"relay-lost/{service['name']}/{service['scan']}", "level": "warning",
                           "text": f"aggregator {service['name']}: {extra['lost_last_scan']} messages of scan "
                                   f"{service['scan']} lost"})
        if service["state"] == _records.STATE_ERROR:
            alerts.append({"id": f"error/{service['service']}/{service['name']}/{service['scan']}", "level": "error",
                           "text": f"{service['service']} {service['name']}: error in scan {service['scan']}: "
                                   f"{extra.get('error', '')}".rstrip(": ")})
        if service["state"] == "invalid":
            alerts.append({"id": f"invalid/{service['service']}", "level": "warning",
                           "text": f"{service['service']} does not decode: {service['error']}"})
    if scans and scans[-1]["died"]:
        alerts.append({"id": f"producer-died/{scans[-1]['scan']}", "level": "error", "text": scans[-1]["died"]})
    if scans and not scans[-1]["in_progress"] and scans[-1]["outcome"] != COMPLETE:
        last = scans[-1]
        alerts.append({"id": f"scan/{last['scan']}/{last['outcome']}", "level": "warning", "text": last["line"]})
    return alerts


def _stamped(alerts: list[dict[str, Any]], memory: Remembered, now_s: float, reachable: bool) -> list[dict[str, Any]]:
    """Each alert with the time it was first raised (``since_s``), which stays while it is raised: the
    page dismisses an alert by its id and time, so the same alert raised again later shows again.

    An alert no longer raised is resolved and forgotten; while the kvstore is unreachable the others
    are not computed, so they are kept."""
    for alert in alerts:
        alert["since_s"] = memory.alerts_since.setdefault(alert["id"], now_s)
    if reachable:
        memory.alerts_since = {alert["id"]: alert["since_s"] for alert in alerts}
    return alerts
