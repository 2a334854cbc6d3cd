"""A NodeGroup rank's watch of producers that died mid-scan: closes their ports, not by timeout.

A receiver whose producer threads are all gone sends nothing more of the scan, yet each port of it
waited ``[nodegroup] scan_timeout_s`` (60 s in configs/local.toml) from its last sector before the
file could be written. This watch finds such receivers as ``sectorflow acquire`` does
(``protocol.scan_parts.abandoned_producers``: a record that is not final and stood still for the kvstore
ttl and two silence periods, its daemon's status gone as long as this rank has looked, or on another
scan; ``sectorflow/absences.py``) and ends that port's part
of the scan at once (``NodeGroup.close_aborted`` with no further message due). By then whatever the
dead threads sent long ago came through; a straggler after it would be counted late.

A receiver with one of its threads still streaming is left to the timeout: the others' sectors are
interleaved with its own on the one port; so is one whose threads died before they began the scan.
"""

from __future__ import annotations

import logging
import queue
from time import monotonic
from collections.abc import Sequence
from typing import Any

from sectorflow.configs import Config
from sectorflow.absences import Absences, gone_after_s
from sectorflow.protocol.scan_parts import abandoned_producers, records_of
from sectorflow.protocol import (SCANS_PREFIX, SERVICE_PRODUCER, ProtocolError, parse_scan_key, scan_prefix,
                                 wall_clock_s)

log = logging.getLogger(__name__)

#: Scans watched at once; beyond, the oldest is left to the scan timeout.
MAX_WATCHED = 16
CHECK_PERIOD_S = 1.0  # records are decoded this often at most, not at every turn of the rank's loop


class DeathWatch:
    """Scans routed to this rank's NodeGroups and not yet written, checked by the rank's loop.

    :param client: the rank's kvstore client (a replica of the whole stack).
    :param config: the ttl and silence periods say when a producer's absence is a death.
    :param groups: the rank's NodeGroups, each with ``uid`` and ``group`` (the C++ NodeGroup).
    """

    def __init__(self, client: Any, config: Config, groups: Sequence[Any]) -> None:
        self._client = client
        self._groups = groups
        self._quiet_s = gone_after_s(config)
        # A status must stay away this long as this rank sees it, not only be absent now: a kvstore
        # restarted with its log serves a live thread's record, its status expired, until it writes again.
        self._absent = Absences(self._quiet_s)
        self._threads = {f"r{r}t{t}" for r, receiver in enumerate(config.receivers) for t in range(receiver.threads)}
        self._seen: queue.SimpleQueue[int] = queue.SimpleQueue()  # requests, from the kvstore agent thread
        self._watched: dict[int, set[int]] = {}  # scan -> receivers whose port this watch closed
        self._checked_s = 0.0
        client.on_change(SCANS_PREFIX, self._on_scan_record)

    def _on_scan_record(self, key: str, value: bytes | None) -> None:
        # On the kvstore agent thread: note the number only. Requests of the first sync are history.
        if value is None or not key.endswith("/request") or not self._client.synced():
            return
        try:
            self._seen.put(parse_scan_key(key))
        except ProtocolError:
            pass

    def check(self) -> None:
        """Close the ports of receivers whose producer threads all died, in the scans not yet written."""
        while True:
            try:
                self._watched.setdefault(self._seen.get_nowait(), set())
            except queue.Empty:
                break
        now = monotonic()
        if now - self._checked_s < CHECK_PERIOD_S or not self._watched:
            return
        self._checked_s = now
        statuses = {name: status for (_, name), status in self._client.statuses(SERVICE_PRODUCER).items()}
        absent = self._absent.lasting(self._threads - set(statuses))
        for scan in sorted(self._watched)[:-MAX_WATCHED]:
            del self._watched[scan]
        for scan in sorted(self._watched):
            records = records_of(self._client.subtree(scan_prefix(scan)), scan)
            request = records.request
            ours = [g for g in self._groups if request is not None and g.uid in request.routing]
            if records.file is not None or (request is not None and not ours):
                del self._watched[scan]
                continue
            if request is None:
                continue
            closed = self._watched[scan]
            dead = abandoned_producers(records, statuses, wall_clock_s(), self._quiet_s, absent)
            for receiver, threads in enumerate(request.producer_threads):
                # Deaths mid-scan only: a receiver none of whose threads began the scan (their
                # record comes first) is left to the timeout, as before (docs/fault-model.md).
                began = all((receiver, t) in records.producers for t in range(threads))
                if (receiver in closed or not threads or not began
                        or any((receiver, t) not in dead for t in range(threads))):
                    continue
                closed.add(receiver)
                log.warning("scan %d: receiver %d's producer threads died mid-scan: its port closes now, not "
                            "[nodegroup] scan_timeout_s after its last sector", scan, receiver)
                for group in ours:
                    group.group.close_aborted(scan, receiver, 0)
