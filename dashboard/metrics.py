"""Prometheus ``/metrics``: every counter and gauge the services publish in the kvstore.

A custom collector (prometheus_client) reads the follower's latest replica at each scrape, so the
numbers are the services' own, never re-counted here: each service's status (``status/<service>/<name>``)
gives messages, bytes, refusals by kind, lost, spilled, frames complete and incomplete and queue
depths; the kvstore server's status its own refusals; the registrations the NodeGroups. Names
follow Prometheus conventions (``sectorflow_..._total`` counters, base units ``_bytes``,
``_seconds``); labels say what varies: ``service``, ``name`` (the status name: ``r0t1``, ``t0``, a
NodeGroup's uid), ``receiver`` and ``nodegroup`` where they apply (a label that does not apply is
left out, never empty), never a scan number. Counters only grow: a producer thread's ``messages``,
``bytes`` and ``spilled`` are its current scan's, so its counters come from the ``*_total`` fields of
its status (every scan since it started) and the current scan's numbers are gauges
(``sectorflow_producer_scan_*``). A service's state is a state set: one series per state of the
services' state machine, 1 for the one it is in. Scan durations (request to file record) are a
histogram fed once per scan by the follower at each update (not at a scrape: scans that came and left
the listed ones between two scrapes would be missed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sectorflow._core import protocol as _records
from sectorflow.aggregator.lease import lease_member
from sectorflow.analysis import registered as registered_analyses
from sectorflow.kvstore.status_records import status_entries
from sectorflow._core.kvstore import REFUSAL_KINDS as KVSTORE_REFUSAL_KINDS
from sectorflow.protocol import SERVICE_LIBERTEM, SERVICE_STATES
from sectorflow.protocol.refusals import TOTAL_FIELD as REFUSED_FIELD
from sectorflow.operations.scan_account import records_of

from .scan_groups import ScanGroups

# Status fields published as counters: field -> (metric name without sectorflow_, help).
COUNTERS = {
    "lost": ("lost_messages", "messages dropped because their NodeGroup was gone or declared dead (aggregator)"),
    "spilled_total": ("spilled_sectors", "sectors written to raw files instead of streamed (producer)"),
    "frames_complete": ("frames_complete", "frames counted with every sector (NodeGroup)"),
    "frames_incomplete": ("frames_incomplete", "frames counted with sectors missing (NodeGroup)"),
    "late_messages": ("late_messages", "sectors that came after their scan was closed (NodeGroup)"),
    "duplicate_sectors": ("duplicate_sectors", "sectors received twice (NodeGroup)"),
    "evicted_frames": ("evicted_frames", "frames counted early as incomplete to free the pool (NodeGroup)"),
    "scans_timed_out": ("scans_timed_out", "scans closed by scan_timeout_s (NodeGroup)"),
    "dead_nodegroups": ("dead_nodegroups", "NodeGroups declared dead for a scan (aggregator)"),
    "evicted_scans": ("evicted_scans", "open scans closed to open a newer one (aggregator)"),
    "bad_records": ("bad_records", "kvstore entries skipped because they do not decode"),
    "positions_total": ("positions_counted", "scan positions (frames) the NodeGroup counted since it started"),
    "electrons_total": ("electrons_counted", "electrons the NodeGroup counted since it started (rate over "
                        "positions_counted: electrons per frame)"),
}
# Counters of one service only (status field names are not unique across services): service -> field
# -> (metric name, help).
SERVICE_COUNTERS = {
    _records.SERVICE_KVSTORE: {
        "failovers": ("kvstore_failovers", "times a server of the kvstore pair became active (the active's count)"),
        "splits": ("kvstore_splits", "times an active server of the pair yielded to its peer (a split healed)"),
    },
    _records.SERVICE_AGGREGATOR: {
        "takeovers": ("aggregator_takeovers", "times a standby aggregator took the lease over (name: active)"),
    },
    SERVICE_LIBERTEM: {
        "scans_served": ("libertem_scans_served", "scans sent whole to a LiberTEM client"),
        "positions_empty": ("libertem_positions_empty", "positions sent to LiberTEM empty: never came in time"),
        "frames_dropped": ("libertem_frames_dropped", "frames not sent: their client was disconnected by the "
                           "bridge's bounded queue"),
        "clients_dropped": ("libertem_clients_dropped", "LiberTEM clients disconnected for reading too slowly"),
    },
}
# Status fields published as gauges: field -> (metric name, help).
GAUGES = {
    "pool_slots_in_use": ("pool_frames", "frames held in the NodeGroup's assembly pool (its queue depth)"),
    "pool_bytes": ("pool_bytes", "bytes of sectors held in the NodeGroup's assembly pool"),
    "open_scans": ("open_scans", "scans open at an aggregator thread"),
    "expected": ("scan_expected_messages", "messages the NodeGroup expects of its current scan"),
    "received": ("scan_received_messages", "messages the NodeGroup received of its current scan"),
    "keys": ("kvstore_keys", "keys in the kvstore server's map"),
    "map_bytes": ("kvstore_map_bytes", "bytes of the kvstore server's map"),
    "electrons_per_frame": ("scan_electrons_per_frame", "mean electrons per frame the NodeGroup counted in its part "
                            "of its last finished scan"),
}
# A producer thread's numbers of its current scan, as gauges: status attribute or extra field -> (name, help).
PRODUCER_SCAN_GAUGES = {
    "messages": ("producer_scan_messages", "messages the producer thread sent of its current or last scan"),
    "bytes": ("producer_scan_bytes", "bytes the producer thread sent of its current or last scan"),
    "spilled": ("producer_scan_spilled_sectors", "sectors of its current or last scan written to raw files"),
}
# Scan durations from request to file record, seconds: a 1 x 1 scan to a large one on a busy link.
DURATION_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)
# Scans whose duration is remembered as observed: far more than an update lists (recent_scans plus a
# margin), so a listed scan is never observed twice, and bounded for a dashboard that runs for years.
REMEMBERED_SCANS = 10_000


class StatusCollector(Collector):
    """The metrics of one replica reading, produced at each scrape."""

    def __init__(self, entries: Callable[[], Mapping[str, bytes]], reachable: Callable[[], bool]) -> None:
        self._entries = entries
        self._reachable = reachable

    def collect(self) -> Iterator[object]:
        entries = self._entries()
        families: dict[str, Metric] = {
            "messages": CounterMetricFamily("sectorflow_messages", "messages handled: sent, relayed or received"),
            "bytes": CounterMetricFamily("sectorflow_bytes", "bytes handled: sent, relayed or received"),
            "refused": CounterMetricFamily("sectorflow_refused_messages", "messages refused, by kind"),
            "up": GaugeMetricFamily("sectorflow_service_up", "1 while the service's status is in the kvstore"),
            "state": GaugeMetricFamily("sectorflow_service_state", "the service's state: one series per state, 1 for "
                                       "the one it is in"),
            "scan": GaugeMetricFamily("sectorflow_service_scan", "the scan the service works on or finished last"),
            "analysed": CounterMetricFamily("sectorflow_analysis_frames", "frames a NodeGroup ran the analysis on "
                                            "(analysis/SPEC.md), by analysis"),
            "analysis_seconds": CounterMetricFamily("sectorflow_analysis_seconds", "seconds a NodeGroup spent in the "
                                                    "analysis's Python from_events (its C++ kernel's time is the "
                                                    "counting's), by analysis"),
        }
        counters = {f: CounterMetricFamily(f"sectorflow_{n}", h) for f, (n, h) in COUNTERS.items()}
        service_counters = {service: {f: CounterMetricFamily(f"sectorflow_{n}", h) for f, (n, h) in table.items()}
                            for service, table in SERVICE_COUNTERS.items()}
        gauges = {f: GaugeMetricFamily(f"sectorflow_{n}", h) for f, (n, h) in GAUGES.items()}
        scan_gauges = {f: GaugeMetricFamily(f"sectorflow_{n}", h) for f, (n, h) in PRODUCER_SCAN_GAUGES.items()}
        for _, service, name, status, _ in status_entries(entries):
            if status is None:
                continue  # the page and 'sectorflow status' name it; a metric has no place for it
            extra = status.extra
            labels = _labels(service, name, extra)
            if service == _records.SERVICE_PRODUCER:
                # Its messages and bytes are this scan's: the counters take every scan's.
                _add(families["messages"], labels, extra.get("messages_total"))
                _add(families["bytes"], labels, extra.get("bytes_total"))
                for field_name, family in scan_gauges.items():
                    _add(family, labels, getattr(status, field_name, None) if field_name in ("messages", "bytes")
                         else extra.get(field_name, 0))
            else:
                _add(families["messages"], labels, status.messages)
                _add(families["bytes"], labels, status.bytes)
            _add(families["up"], labels, 1)
            for state in SERVICE_STATES:
                _add(families["state"], {**labels, "state": state}, 1 if state == status.state else 0)
            _add(families["scan"], labels, status.scan)
            for kind, count in _refusals(service, extra).items():
                _add(families["refused"], {**labels, "kind": kind}, count)
            for field_name, family in (*counters.items(), *gauges.items(), *service_counters.get(service, {}).items()):
                _add(family, labels, extra.get(field_name))
            for analysis in registered_analyses():  # a label per registered analysis, never one per scan
                _add(families["analysed"], {**labels, "analysis": analysis.name},
                     extra.get(f"analysis_{analysis.name}_frames_total"))
                _add(families["analysis_seconds"], {**labels, "analysis": analysis.name},
                     extra.get(f"analysis_{analysis.name}_seconds_total"))
        registered = GaugeMetricFamily("sectorflow_nodegroups_registered", "NodeGroups registered in the kvstore")
        listing = _records.nodegroups_from(
            {k: v for k, v in entries.items() if k.startswith(_records.NODEGROUPS_PREFIX)})
        registered.add_metric([], len(listing.records))
        active = GaugeMetricFamily("sectorflow_active", "1 for the active kvstore server of a pair (name: its role) "
                                   "and the aggregator holding the lease (name: host:pid)", labels=["service", "name"])
        for service, name in _actives(entries):
            active.add_metric([service, name], 1)
        reachable = GaugeMetricFamily("sectorflow_kvstore_reachable", "1 while the dashboard's kvstore replica is live")
        reachable.add_metric([], 1 if self._reachable() else 0)
        yield from families.values()
        yield from counters.values()
        for table in service_counters.values():
            yield from table.values()
        yield from gauges.values()
        yield from scan_gauges.values()
        yield registered
        yield active
        yield reachable


def _actives(entries: Mapping[str, bytes]) -> list[tuple[str, str]]:
    """(service, name) of the active kvstore server of a pair and of the aggregator holding a lease
    (each member's, with a tier)."""
    found = []
    for _, service, name, status, _ in status_entries(entries):
        if status is None:
            continue
        extra = status.extra
        if service == _records.SERVICE_KVSTORE and extra.get("pair_state") == "active":
            found.append((service, str(extra.get("pair"))))
        if service == _records.SERVICE_AGGREGATOR and lease_member(name) is not None and "host" in extra:
            found.append((service, f"{extra['host']}:{extra.get('pid')}"))
    return found


def _add(family: Metric, labels: Mapping[str, str], value: object) -> None:
    """One sample of ``family`` (a counter's named ``_total``), if ``value`` is a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    suffix = "_total" if family.type == "counter" else ""
    family.add_sample(family.name + suffix, dict(labels), float(value))


def _labels(service: str, name: str, extra: Mapping[str, object]) -> dict[str, str]:
    """service and name, and receiver or nodegroup where they apply: never an empty value."""
    labels = {"service": service, "name": name}
    receiver = _receiver(service, name, extra)
    if receiver:
        labels["receiver"] = receiver
    if service == "nodegroup":
        labels["nodegroup"] = name
    if service == _records.SERVICE_AGGREGATOR and isinstance(extra.get("member"), int):
        labels["aggregator"] = str(extra["member"])  # the member of the aggregation tier
    return labels


def _receiver(service: str, name: str, extra: Mapping[str, object]) -> str:
    if service == _records.SERVICE_PRODUCER and "receiver" in extra:
        return str(extra["receiver"])
    if service == _records.SERVICE_AGGREGATOR and "receiver" in extra:
        return str(extra["receiver"])  # relay thread j of the tier: member j // R, receiver j % R
    if service == _records.SERVICE_AGGREGATOR and name.startswith("t") and name[1:].isdigit():
        return name[1:]  # a status from before the tier: relay thread r carries receiver r
    return ""


def _refusals(service: str, extra: Mapping[str, object]) -> dict[str, int]:
    if service == _records.SERVICE_KVSTORE:
        return {kind: int(extra[kind]) for kind in KVSTORE_REFUSAL_KINDS if isinstance(extra.get(kind), int)}
    prefix = f"{REFUSED_FIELD}_"
    kinds = {key[len(prefix):]: int(value) for key, value in extra.items()
             if key.startswith(prefix) and isinstance(value, int)}
    # A NodeGroup's live stream: requests refused, failed handshakes, subscribers dropped for not reading.
    kinds.update({key: int(extra[key]) for key in LIVE_REFUSALS if isinstance(extra.get(key), int)})
    return kinds


LIVE_REFUSALS = ("live_refused", "live_handshakes_refused", "live_subscribers_dropped")


class ScanDurations:
    """The histogram of scan durations, fed once per scan whose file record came.

    ``observe`` is called with each update's listed scans; a scan is told apart from a later run of
    the same number by its request time.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.histogram = Histogram("sectorflow_scan_duration_seconds", "from a scan's request to its file record",
                                   buckets=DURATION_BUCKETS, registry=registry)
        self._seen: dict[tuple[int, float], None] = {}  # (scan, requested_s), in the order observed

    def observe(self, groups: ScanGroups) -> None:
        for scan, keys in groups.scans.items():
            # From the parts or a folded scan's summary alike; a record that does not decode is left
            # out (the page names it).
            records = records_of(keys, scan)
            request, file = records.request, records.file
            if request is None or file is None:
                continue
            written_s = file.written_s
            key = (scan, request.requested_s)
            if key in self._seen:
                continue
            self._seen[key] = None
            if len(self._seen) > REMEMBERED_SCANS:
                del self._seen[next(iter(self._seen))]  # the first observed
            self.histogram.observe(max(0.0, written_s - request.requested_s))


def make_registry(entries: Callable[[], Mapping[str, bytes]], reachable: Callable[[], bool]) -> tuple[
        CollectorRegistry, ScanDurations]:
    """A registry holding the status collector and the scan-duration histogram."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(entries, reachable))
    return registry, ScanDurations(registry)
