"""A NodeGroup rank's watch of the aggregation tier's members a scan goes without.

A NodeGroup binds one data port per relay thread of the tier (protocol/SPEC.md, "The aggregation
tier"): port j is member j // R's thread for receiver j % R. ``sectorflow acquire`` records in the
scan's request (``scans/<n>/request``, ``tier``) the members that carry it; a member that was down
then sends nothing of the scan, not even a count, so its ports would wait ``[nodegroup]
scan_timeout_s``. This watch tells the rank's NodeGroups at once that those ports carry nothing of
the scan (``NodeGroup.close_aborted(scan, port, 0)``: the port's part is over at 0 messages).

Only requests that come while the job runs are watched, as aborts are (consumer/nodegroup/abort_watch.py):
what the first sync brings is history.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Sequence
from typing import Any

from sectorflow.protocol import SCANS_PREFIX, ProtocolError, ScanRequestRecord, parse_scan_key
from sectorflow.protocol.scan_parts import relay_thread

log = logging.getLogger(__name__)

_REQUEST_PART = "/request"


class TierWatch:
    """Scans requested without some members of the tier, handed to the rank's NodeGroups by its loop.

    :param client: the rank's kvstore client (a replica of the whole stack).
    :param members: the members of ``[aggregator] tier`` (1 without a tier: nothing to watch).
    :param receivers: R, the receivers: each member has R relay threads.
    :param groups: the rank's NodeGroups, each with ``group`` (the C++ NodeGroup).
    """

    def __init__(self, client: Any, members: int, receivers: int, groups: Sequence[Any]) -> None:
        self._client = client
        self._members = members
        self._receivers = receivers
        self._groups = groups
        self._seen: queue.SimpleQueue[tuple[int, bytes]] = queue.SimpleQueue()
        if members > 1:
            client.on_change(SCANS_PREFIX, self._on_scan_record)

    def _on_scan_record(self, key: str, value: bytes | None) -> None:
        # On the kvstore agent thread: hand over, never work here.
        if value is None or not key.endswith(_REQUEST_PART) or not self._client.synced():
            return
        try:
            self._seen.put((parse_scan_key(key), value))
        except ProtocolError:
            return

    def check(self) -> None:
        """Close the ports of the members each newly requested scan goes without."""
        while True:
            try:
                scan, raw = self._seen.get_nowait()
            except queue.Empty:
                return
            try:
                record = ScanRequestRecord.decode(raw)
            except ProtocolError as error:
                log.warning("scan %d: its request record does not decode (%s): every member's ports wait for it",
                            scan, error)
                continue
            absent = [member for member in range(self._members) if record.tier and not record.carried_by(member)]
            if not absent:
                continue
            log.info("scan %d: goes without aggregator member(s) %s of the tier: their ports carry none of it",
                     scan, ", ".join(map(str, absent)))
            for member in absent:
                for receiver in range(self._receivers):
                    for group in self._groups:
                        group.group.close_aborted(scan, relay_thread(member, receiver, self._receivers), 0)
