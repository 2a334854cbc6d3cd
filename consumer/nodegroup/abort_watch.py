"""A NodeGroup rank's watch of aborted scans: closes them by what the relays forwarded, not by timeout.

``sectorflow abort N`` writes ``scans/<n>/abort`` (protocol/scan_life.py). The producer threads stop
sending; each relay thread closes the scan once what they sent has come through, and writes
``scans/<n>/aggregator/t<r>`` with what it forwarded to each NodeGroup (aggregator/src/relay.hpp).
This watch hands those counts to the NodeGroups of the rank (``NodeGroup.close_aborted``) once they
are final: every producer thread of receiver r wrote its last record (finished or error) and the
relay record accounts for all they sent (a relay also writes its record before the scan closes,
when it declares a NodeGroup dead: such a record is taken only once it is final too). Port r's
part of the scan then ends as soon as that many messages came, so the file is written within moments
of the abort instead of ``[nodegroup] scan_timeout_s`` after the last sector. A relay that never
closes the scan (it died, or restarted mid-scan) leaves its port to that timeout, as before.

Only aborts that come while the job runs are watched: a scan aborted before (still in the
kvstore's records) may be replayed under its number, and its old relay records would cut the
replay short. Nor is one that comes before the scan's request (in the kvstore's order): no
operator's abort (``sectorflow abort`` refuses a scan not requested); ``sectorflow acquire`` erases it.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Sequence
from typing import Any

from sectorflow.protocol import (
    SCANS_PREFIX,
    STATE_ERROR,
    STATE_FINISHED,
    ProducerScanRecord,
    ProtocolError,
    RelayScanRecord,
    ScanRequestRecord,
    parse_scan_key,
    scan_file_key,
    scan_producer_key,
    scan_relay_key,
    scan_request_key,
)
from sectorflow.protocol.scan_parts import relay_thread

log = logging.getLogger(__name__)

#: Aborted scans watched at once; beyond, the oldest is left to the scan timeout (aborts are rare).
MAX_WATCHED = 64


class AbortWatch:
    """Aborted scans whose relay records have not all come yet, checked by the rank's loop.

    :param client: the rank's kvstore client (a replica of the whole stack).
    :param producer_threads: per receiver, its producer threads. Relay thread j of the aggregation
        tier (protocol/SPEC.md) serves receiver j % R for member j // R; without a tier, j = r.
    :param groups: the rank's NodeGroups, each with ``uid`` and ``group`` (the C++ NodeGroup).
    """

    def __init__(self, client: Any, producer_threads: Sequence[int], groups: Sequence[Any]) -> None:
        self._client = client
        self._threads = list(producer_threads)
        self._groups = groups
        self._seen: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._pending: dict[int, set[int]] = {}  # scan -> relay threads whose record has not come
        client.on_change(SCANS_PREFIX, self._on_scan_record)

    def _on_scan_record(self, key: str, value: bytes | None) -> None:
        # On the kvstore agent thread: hand over, never work here. What the first sync brings is
        # history (see the module's docstring).
        if value is None or not key.endswith("/abort") or not self._client.synced():
            return
        try:
            scan = parse_scan_key(key)
        except ProtocolError:
            return
        if self._client.get(scan_request_key(scan)) is None:
            log.warning("scan %d: an abort (%s) before the scan was requested: ignored", scan, key)
            return
        self._seen.put(scan)

    def check(self) -> None:
        """Take the aborts seen since, and give the NodeGroups the relay counts that came."""
        while True:
            try:
                scan = self._seen.get_nowait()
            except queue.Empty:
                break
            if scan not in self._pending:
                log.warning("scan %d: aborted (sectorflow abort): closing it once the relays have closed it", scan)
                self._pending[scan] = self._relay_threads(scan)
                while len(self._pending) > MAX_WATCHED:
                    del self._pending[next(iter(self._pending))]
        receivers = len(self._threads)
        for scan, threads in list(self._pending.items()):
            for thread in sorted(threads):
                raw = self._client.get(scan_relay_key(scan, thread))
                sent = self._sent(scan, thread % receivers, thread // receivers)
                if raw is None or sent is None:
                    continue
                try:
                    record = RelayScanRecord.decode(raw)
                except ProtocolError as error:
                    threads.discard(thread)
                    log.warning("scan %d: relay record of aggregator thread %d does not decode (%s); that port "
                                "waits for [nodegroup] scan_timeout_s", scan, thread, error)
                    continue
                if sum(record.forwarded.values()) + sum(record.lost.values()) < sent:
                    continue  # an earlier record (a NodeGroup declared dead), or the relay is not through yet
                threads.discard(thread)
                for group in self._groups:
                    if group.uid in record.forwarded:
                        group.group.close_aborted(scan, thread, int(record.forwarded[group.uid]))
            # Done once every relay thread's count is given, or the file is written anyway.
            if not threads or self._client.get(scan_file_key(scan)) is not None:
                del self._pending[scan]

    def _relay_threads(self, scan: int) -> set[int]:
        """The relay threads that carry ``scan``: receiver r's of every member in its request's tier
        list (member 0 alone without a tier)."""
        members = [0]
        raw = self._client.get(scan_request_key(scan))
        if raw is not None:
            try:
                members = list(ScanRequestRecord.decode(raw).tier) or [0]
            except ProtocolError:
                pass  # the request says nothing usable: member 0's, as without a tier
        receivers = len(self._threads)
        return {relay_thread(member, r, receivers) for member in members for r in range(receivers)}

    def _sent(self, scan: int, receiver: int, member: int = 0) -> int | None:
        """What receiver ``receiver``'s producer threads sent of ``scan`` through tier member
        ``member`` (all of it without a tier), once each wrote its last record; None before (or if
        one does not decode: its port waits for the timeout)."""
        sent = 0
        for thread in range(self._threads[receiver]):
            raw = self._client.get(scan_producer_key(scan, receiver, thread))
            if raw is None:
                return None
            try:
                record = ProducerScanRecord.decode(raw)
            except ProtocolError:
                return None
            if record.state not in (STATE_FINISHED, STATE_ERROR):
                return None
            sent += int(record.sent_to(member))
        return sent
