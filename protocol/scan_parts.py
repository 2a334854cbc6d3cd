"""A scan's records as a replica holds them (kvstore/SPEC.md, "scans/<n:010d>/..."), and which
producer threads will never end their part of it.

Read by the operator's account (operations/scan_account.py: ``acquire --wait``, ``status``, the
dashboard) and by the services that act on a scan's records (the NodeGroups' watch of dead
producers), so it sits with the records, below both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from sectorflow._core import protocol as _records

from .scan_instrument import ScanInstrument
from .scan_life import ScanAbort, ScanClaim
from .scan_summary import SUMMARY_PART, decode_parts

SOURCE_NATIVE = _records.SOURCE_NATIVE  # the aggregator wrote the request: a native receiver's stream began the scan
FINAL_PRODUCER_STATES = frozenset({_records.STATE_FINISHED, _records.STATE_ERROR})
_PRODUCER_NAME = re.compile(r"r(\d+)t(\d+)")
_RELAY_NAME = re.compile(r"t(\d+)")


@dataclass
class ScanRecords:
    """Every record of one scan that a replica holds; parts that do not decode are in ``rejected``."""

    scan: int
    request: _records.ScanRequestRecord | None = None
    producers: dict[tuple[int, int], _records.ProducerScanRecord] = field(default_factory=dict)
    # Per receiver r: its relay threads' records, one per member of the aggregation tier, summed
    # (a tier of one: relay thread r's record itself).
    relays: dict[int, _records.RelayScanRecord] = field(default_factory=dict)
    # Per relay thread j of the tier (member j // receivers, receiver j % receivers): its record.
    relay_threads: dict[int, _records.RelayScanRecord] = field(default_factory=dict)
    nodegroups: dict[str, _records.NodeGroupScanRecord] = field(default_factory=dict)
    file: _records.ScanFileRecord | None = None
    claim: ScanClaim | None = None
    abort: ScanAbort | None = None
    instrument: ScanInstrument | None = None
    rejected: dict[str, str] = field(default_factory=dict)


def scans_in(entries: Mapping[str, bytes]) -> list[int]:
    """The scan numbers that have records in ``entries`` (a replica's content), ascending."""
    numbers = set()
    for key in entries:
        if key.startswith(_records.SCANS_PREFIX):
            try:
                numbers.add(_records.parse_scan_key(key))
            except _records.ProtocolError:
                continue
    return sorted(numbers)


def records_of(entries: Mapping[str, bytes], scan: int) -> ScanRecords:
    """The records of ``scan`` in ``entries`` (key -> value bytes, e.g. ``client.subtree(scan_prefix(n))``).

    A folded scan's summary (protocol/scan_summary.py) gives its parts as the keys did; a part's key
    written after the fold replaces the folded part.
    """
    prefix = _records.scan_prefix(scan)
    records = ScanRecords(scan)
    parts: dict[str, tuple[str, bytes]] = {}
    summary = entries.get(prefix + SUMMARY_PART)
    if summary is not None:
        try:
            parts = {part: (prefix + part, raw) for part, raw in decode_parts(summary).items()}
        except _records.ProtocolError as error:
            records.rejected[prefix + SUMMARY_PART] = str(error)
    for key, raw in entries.items():
        if key.startswith(prefix) and key != prefix + SUMMARY_PART:
            parts[key[len(prefix):]] = (key, raw)
    for part, (key, raw) in parts.items():
        try:
            _add(records, part, raw)
        except _records.ProtocolError as error:
            records.rejected[key] = str(error)
    records.relays = relays_per_receiver(records)
    return records


def relay_thread(member: int, receiver: int, receivers: int) -> int:
    """Relay thread j of the aggregation tier: member ``member``'s thread for ``receiver`` (of
    ``receivers``), j = member x receivers + receiver: its port offset, status t<j>, relay record
    and NodeGroup port (protocol/SPEC.md, "The aggregation tier")."""
    return member * receivers + receiver


def relays_per_receiver(records: ScanRecords) -> dict[int, _records.RelayScanRecord]:
    """Each receiver's relay records summed over the aggregation tier (protocol/SPEC.md, "The
    aggregation tier"): forwarded and lost added, the dead NodeGroups of any member, complete when
    every member's is. With no request, or a tier of one, relay thread r is receiver r's."""
    request = records.request
    if request is None or len(request.tier) <= 1 or not request.producer_threads:
        return dict(records.relay_threads)
    receivers = len(request.producer_threads)
    merged: dict[int, _records.RelayScanRecord] = {}
    for thread, relay in sorted(records.relay_threads.items()):
        receiver = thread % receivers
        total = merged.get(receiver)
        if total is None:
            merged[receiver] = _records.RelayScanRecord(
                thread=receiver, complete=relay.complete, forwarded=dict(relay.forwarded), lost=dict(relay.lost),
                dead=list(relay.dead), updated_s=relay.updated_s, run=relay.run)
            continue
        total.complete = total.complete and relay.complete
        total.forwarded = {uid: total.forwarded.get(uid, 0) + relay.forwarded.get(uid, 0)
                           for uid in {*total.forwarded, *relay.forwarded}}
        total.lost = {uid: total.lost.get(uid, 0) + relay.lost.get(uid, 0) for uid in {*total.lost, *relay.lost}}
        total.dead = sorted({*total.dead, *relay.dead})
        total.updated_s = max(total.updated_s, relay.updated_s)
    for receiver, total in merged.items():
        # A receiver some member never wrote a record for is not complete across the tier.
        members = sum(1 for thread in records.relay_threads if thread % receivers == receiver)
        total.complete = total.complete and members == len(request.tier)
    return merged


def _add(records: ScanRecords, part: str, raw: bytes) -> None:
    kind, _, name = part.partition("/")
    if part == "request":
        records.request = _records.ScanRequestRecord.decode(raw)
    elif part == "file":
        records.file = _records.ScanFileRecord.decode(raw)
    elif part == "claim":
        records.claim = ScanClaim.decode(raw)
    elif part == "abort":
        records.abort = ScanAbort.decode(raw)
    elif part == "instrument":
        records.instrument = ScanInstrument.decode(raw)
    elif kind == "producer" and (match := _PRODUCER_NAME.fullmatch(name)):
        records.producers[(int(match[1]), int(match[2]))] = _records.ProducerScanRecord.decode(raw)
    elif kind == "aggregator" and (match := _RELAY_NAME.fullmatch(name)):
        records.relay_threads[int(match[1])] = _records.RelayScanRecord.decode(raw)
    elif kind == "nodegroup" and name:
        records.nodegroups[name] = _records.NodeGroupScanRecord.decode(raw)
    else:
        raise _records.ProtocolError(f"no record is written under {part!r}")


# How long a producer thread's unfinished record of a scan must stand still, with no daemon of the
# thread working on the scan, before its part counts as ended. A live thread's status names its scan
# (written just after the record, producer.cpp begin_scan), so this only spans a status that is a
# moment behind its record, or gone for the blink of a kvstore restart.
PRODUCER_QUIET_S = 3.0


def abandoned_producers(records: ScanRecords, statuses: Mapping[str, _records.ServiceStatus], now_s: float,
                        quiet_s: float = PRODUCER_QUIET_S,
                        absent: Set[str] | None = None) -> set[tuple[int, int]]:
    """The producer threads whose part of the scan will never end: their record is not final, has not
    moved for ``quiet_s`` and no daemon of the thread works on the scan: its status is gone (the daemon
    died), or names another scan (a daemon started since, which never takes up a scan it did not begin).

    Args:
        statuses: thread name (``r<R>t<T>``) -> its status (``status/producer/<name>``).
        now_s: Unix seconds, against the records' ``updated_s`` (the producers' clocks).
        absent: the names whose status has been gone long enough to be a death (``acquire``'s
            watch over a kvstore restart's blink); None: a status not in ``statuses`` is gone.
    """
    request = records.request
    if request is None or request.source == SOURCE_NATIVE:
        return set()
    abandoned = set()
    for receiver, threads in enumerate(request.producer_threads):
        for thread in range(threads):
            part = records.producers.get((receiver, thread))
            if part is not None and part.state in FINAL_PRODUCER_STATES:
                continue
            if now_s - (part.updated_s if part is not None else request.requested_s) < quiet_s:
                continue
            name = f"r{receiver}t{thread}"
            status = statuses.get(name)
            if name in absent if absent is not None else status is None:
                abandoned.add((receiver, thread))
            elif status is not None and status.scan != records.scan and (
                    part is not None or status.state == _records.STATE_IDLE):
                # An idle daemon takes a waiting request at once: one that has not is a daemon started
                # after it (it skips the requests that predate it).
                abandoned.add((receiver, thread))
    return abandoned
