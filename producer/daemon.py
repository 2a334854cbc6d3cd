"""The producer daemon of one receiver: acquires its sector of every requested scan, once.

States (the one state machine, ``sectorflow.service``; logged on every transition): ``starting``
(kvstore client set up, replica syncing) -> ``idle`` (watching ``acquire/request``) ->
``streaming`` or ``writing-to-disk`` (a scan runs on the receiver's T threads) -> ``idle`` ... ->
``stopping`` -> ``stopped``. Each producer thread publishes its own state in its status.

A request is an event: the daemon acquires each (scan number, source) once, the first time a
request for it appears after the daemon is idle, so a scan written to disk may later be replayed
once under its own number. A request already present when the daemon starts is not acquired (it
was somebody else's); a request repeated for a scan already acquired is ignored with a warning. Each producer thread publishes its own status (``status/producer/r<R>t<T>``) and its part of the
scan's record (``scans/<n>/producer/r<R>t<T>``); a request refused here, or a source that cannot
open, is recorded there as an error, so that no scan a producer was asked for is lost silently.
An abort (``scans/<n>/abort``, ``sectorflow abort``) stops every thread's sending of that scan at its
next sector, or refuses the scan if it has not begun; each thread's record then says ``error`` with the
abort and what it sent and spilled before. An abort that comes before the scan's request (in the
kvstore's order) is ignored: it is nobody's abort of that scan (``sectorflow acquire`` erases it).
After each scan the daemon logs one line: the receiver's sectors sent, spilled to raw files and
missing.

A daemon whose receiver is served already by a live daemon of another process (its threads'
statuses, ``sectorflow.ownership``) stops at start with one line naming that process's host and pid.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sectorflow._core.producer import (
    Mode,
    Producer,
    ProducerError,
    ProducerStopped,
    ReplaySource,
    ScanDecision,
    ScanRequest,
    ScanResult,
    SectorSource,
    SiblingGate,
    check_first_frame,
    simulator_source,
)
from sectorflow._core.simulator import Pacer
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.protocol import (
    ACQUIRE_REQUEST_KEY,
    RAW_PARTIAL_SUFFIX,
    SCANS_PREFIX,
    SERVICE_PRODUCER,
    RAW_WRITING_SUFFIX,
    SOURCE_REPLAY,
    STATE_IDLE,
    STATE_STOPPED,
    STATE_STOPPING,
    STATE_STREAMING,
    STATE_WRITING_TO_DISK,
    AcquireRequest,
    ProtocolError,
    check_scan_shape,
    parse_scan_key,
    scan_request_key,
)
from sectorflow.ownership import refuse_if_running
from sectorflow.service import ServiceState
from sectorflow.simulator import simulator_from_config
from sectorflow.waiting import WaitTimeout, wait_until

from .options import check_receiver, producer_options

log = logging.getLogger(__name__)


# How often the idle loop looks at the stop flag, and the scan loop logs progress.
POLL_S = 0.2
PROGRESS_S = 5.0


@dataclass
class ThreadOutcome:
    """What one producer thread did with a scan."""

    decision: ScanDecision | None = None
    result: ScanResult | None = None
    error: str = ""
    stopped: bool = False


@dataclass
class ProducerDaemon:
    """``sectorflow producer --receiver R``: T producer threads fed by the simulator or by replay."""

    config: Config
    receiver: int
    acquired: set[tuple[int, str]] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _requests: queue.Queue = field(default_factory=queue.Queue)
    _producers: list[Producer] = field(default_factory=list)
    _aborted: set[int] = field(default_factory=set)  # scans aborted while this daemon ran
    _client: Client | None = None  # the replica the abort watch reads (set by run)

    def __post_init__(self) -> None:
        check_receiver(self.config, self.receiver)
        self.threads = self.config.receivers[self.receiver].threads
        self.state = ServiceState(log, name=f"producer r{self.receiver}")


    def stop(self) -> None:
        """Ask the daemon to stop: a running scan is interrupted (safe from a signal handler)."""
        self._stop.set()
        for producer in self._producers:
            producer.stop()

    def run(self, sync_timeout_s: float = 30.0) -> int:
        """Serve acquisition requests until stop(); returns the exit code (0).

        Raises:
            SectorflowError: the kvstore did not answer within ``sync_timeout_s``.
        """
        with Client.from_config(self.config, name=f"producer r{self.receiver}", role="producer") as client:
            self._client = client
            try:
                client.on_change(ACQUIRE_REQUEST_KEY, self._on_request)
                client.on_change(SCANS_PREFIX, self._on_scan_record)
                self._wait_synced(client, sync_timeout_s)
                if self._stop.is_set():
                    return 0
                # Before anything is written: a second daemon of the receiver would share its scans.
                refuse_if_running(client.statuses(SERVICE_PRODUCER),
                                  lambda _name, status: status.extra.get("receiver") == self.receiver,
                                  f"a producer daemon for receiver {self.receiver}", stack=client.stack_id)
                self._skip_existing_request(client)
                self._mark_abandoned_files()
                # Only now: each Producer publishes its idle status, which is what `sectorflow acquire`
                # and the stack wait for before requesting; a request seen after this is a new one.
                self._producers = [
                    Producer(producer_options(self.config, self.receiver, t, warn=log.warning), client)
                    for t in range(self.threads)
                ]
                self.state.enter(STATE_IDLE, f"{self.threads} threads, watching {ACQUIRE_REQUEST_KEY}")
                while not self._stop.is_set():
                    try:
                        value = self._requests.get(timeout=POLL_S)
                    except queue.Empty:
                        continue
                    self._handle(value)
                self.state.enter(STATE_STOPPING)
            finally:
                self._producers.clear()  # each waits up to its linger for queued messages
        self.state.enter(STATE_STOPPED)
        return 0

    def _on_request(self, key: str, value: bytes | None) -> None:
        # On the kvstore agent thread: hand over, never work here.
        if value is not None:
            self._requests.put(value)

    def _on_scan_record(self, key: str, value: bytes | None) -> None:
        # On the kvstore agent thread: only a flag for the producers, whose threads see it at their next sector.
        if value is None or not key.endswith("/abort"):
            return
        try:
            scan = parse_scan_key(key)
        except ProtocolError:
            return
        if scan in self._aborted:
            return
        if self._client is not None and self._client.get(scan_request_key(scan)) is None:
            # Before the scan's request (the kvstore's order): no operator's abort ('sectorflow abort'
            # refuses a scan not requested), so it must not refuse the scan when it comes; acquire
            # erases it and says so.
            log.warning("scan %d: an abort (%s) before the scan was requested: ignored", scan, key)
            return
        self._aborted.add(scan)
        for producer in list(self._producers):
            producer.abort_scan(scan)
        log.warning("scan %d: aborted (%s): its sending stops", scan, key)

    def _wait_synced(self, client: Client, timeout_s: float) -> None:
        kv = self.config.kvstore
        try:
            # Each poll blocks in the client for up to POLL_S; a stop ends the wait between two.
            wait_until(lambda: client.wait_synced(POLL_S), timeout_s, f"kvstore at {kv.address}", 0.0,
                       stop=self._stop)
        except WaitTimeout:
            raise SectorflowError(
                f"kvstore at {kv.address} did not answer within {timeout_s:.0f} s; "
                "start it with 'sectorflow kvstore' or fix [kvstore] in the configuration"
            ) from None

    def _mark_abandoned_files(self) -> None:
        """Renames the raw files a killed daemon of this receiver left being written to ``.partial``.

        They never pass as whole (``.writing`` is not a raw file's name); the rename says what they are.
        """
        directory = Path(self.config.producer.fallback_dir)
        if not directory.is_dir():
            return
        for path in sorted(directory.glob(f"*_module{self.receiver}_*{RAW_WRITING_SUFFIX}")):
            partial = path.with_name(path.name.removesuffix(RAW_WRITING_SUFFIX) + RAW_PARTIAL_SUFFIX)
            try:
                os.link(path, partial)  # never over an existing file
                path.unlink()
            except OSError as error:
                log.warning("%s: left by a stopped producer; cannot mark it partial: %s", path, error)
                continue
            log.warning("%s: left by a producer that did not finish it; renamed %s", path, partial.name)

    def _skip_existing_request(self, client: Client) -> None:
        raw = client.get(ACQUIRE_REQUEST_KEY)
        if raw is None:
            return
        try:
            request = AcquireRequest.decode(raw)
        except ProtocolError:
            return
        self.acquired.add((request.scan_number, request.source))
        log.info("scan %d: its request predates this producer; not acquired", request.scan_number)

    def _handle(self, value: bytes) -> None:
        try:
            request = AcquireRequest.decode(value)
        except ProtocolError as error:
            log.error("%s holds an invalid request, ignored: %s", ACQUIRE_REQUEST_KEY, error)
            return
        try:
            # Everything the scan allocates is sized from this shape: bound it before anything is built.
            check_scan_shape(request.scan_x, request.scan_y, self.config.limits.max_scan_positions)
        except ProtocolError as error:
            log.error("%s: request refused: %s", ACQUIRE_REQUEST_KEY, error)
            self._report_error(request, str(error))
            return
        if (request.scan_number, request.source) in self.acquired:
            log.warning("scan %d: already acquired from the %s by this producer; request ignored",
                        request.scan_number, request.source)
            return
        self.acquired.add((request.scan_number, request.source))
        if request.scan_number in self._aborted:
            log.warning("scan %d: aborted before it began here; not acquired", request.scan_number)
            self._report_error(request, f"scan {request.scan_number} was aborted (sectorflow abort) before it began")
            return
        # An empty routing list in the request means every thread writes the scan to disk.
        working = STATE_WRITING_TO_DISK if request.routing == [] else STATE_STREAMING
        self.state.enter(working, f"scan {request.scan_number}, {request.scan_x} x {request.scan_y}, "
                                    f"source {request.source}")
        try:
            self._acquire(request)
        except Exception as error:  # noqa: BLE001 - a failed scan must not end the daemon
            log.error("scan %d: failed: %s: %s", request.scan_number, type(error).__name__, error)
        finally:
            if not self._stop.is_set():
                self.state.enter(STATE_IDLE)

    def _report_error(self, request: AcquireRequest, error: str) -> None:
        """Every thread records the scan as failed, with the sectors it owned: none of them is sent or spilled."""
        for producer in self._producers:
            try:
                producer.report_error(request.scan_number, error, request.scan_x, request.scan_y)
            except SectorflowError as failure:  # the record could not be written; the log line above stays
                log.error("scan %d: %s could not record the error: %s", request.scan_number,
                          producer.options.name(), failure)

    def _sources(self, request: AcquireRequest) -> tuple[list[SectorSource], int]:
        """One source per thread and the scan's first frame number (the detector's counter at position 0).

        A simulated scan starts at ``[simulator] first_frame``; a replay at the frame numbers its files
        carry. Raises for a replay whose files do not match (a receiver with none replays nothing).
        """
        n_frames = request.scan_x * request.scan_y
        if request.source == SOURCE_REPLAY:
            if request.routing is not None and not request.routing:
                raise SectorflowError(
                    f"scan {request.scan_number}: replay needs a registered NodeGroup (the request has none); "
                    "its raw files would be written over themselves"
                )
            replays = [
                ReplaySource(self.config.producer.fallback_dir, request.scan_number, self.receiver, request.scan_x,
                             request.scan_y, self.threads, t, self.config.geometry())
                for t in range(self.threads)
            ]
            if not replays[0].files:
                log.warning("scan %d: receiver %d has no raw file of the scan in %s ([producer] fallback_dir): "
                            "nothing of it to replay", request.scan_number, self.receiver,
                            self.config.producer.fallback_dir)
            # Every thread read the headers of the same files, so they agree on it.
            return [*replays], replays[0].first_frame
        simulator = simulator_from_config(self.config)
        # One pacer for all threads: frame f is due at f / rate, whichever thread owns it.
        pacer = Pacer(request.rate_hz) if request.rate_hz > 0 else None
        sources = [
            simulator_source(simulator, request.scan_number, self.receiver, n_frames, self.threads, t, pacer,
                             scan_x=request.scan_x)
            for t in range(self.threads)
        ]
        return sources, self.config.simulator.first_frame

    def _acquire(self, request: AcquireRequest) -> None:
        scan = request.scan_number
        try:
            sources, first_frame = self._sources(request)
            # Refused here, before the threads start, it is recorded as any refused request is.
            check_first_frame(f"scan {scan}", first_frame, request.scan_x * request.scan_y)
        except (SectorflowError, ValueError) as error:  # ProducerError, RawFileError (a ValueError)
            log.error("scan %d: not acquired: %s", scan, error)
            self._report_error(request, str(error))
            return
        scan_request = ScanRequest(scan_number=scan, scan_x=request.scan_x, scan_y=request.scan_y,
                                   routing=request.routing, first_frame=first_frame, tier=list(request.tier))
        outcomes = [ThreadOutcome() for _ in self._producers]
        gate = SiblingGate(self.threads, self.config.producer.max_lead_frames)
        workers = [
            threading.Thread(target=self._run_thread, args=(producer, scan_request, source, gate, outcome),
                             name=f"producer-r{self.receiver}t{t}")
            for t, (producer, source, outcome) in enumerate(zip(self._producers, sources, outcomes))
        ]
        started = time.monotonic()
        for worker in workers:
            worker.start()
        last_progress = started
        for worker in workers:
            while worker.is_alive():
                worker.join(POLL_S)
                now = time.monotonic()
                if now - last_progress >= PROGRESS_S:
                    last_progress = now
                    log.info("scan %d: %d messages, %.1f MB so far", scan,
                             sum(p.messages for p in self._producers), sum(p.bytes for p in self._producers) / 1e6)
        self._summarise(scan, outcomes, time.monotonic() - started)

    def _run_thread(self, producer: Producer, request: ScanRequest, source: SectorSource, gate: SiblingGate,
                    outcome: ThreadOutcome) -> None:
        name = producer.options.name()
        try:
            positions = source.frames()
            outcome.decision = producer.begin_scan(request, positions)
            decision = outcome.decision
            if decision.mode == Mode.STREAMING:
                log.info("scan %d: %s streams %d messages (%s wire, frames from %d) to %d NodeGroups %s",
                         request.scan_number, name, decision.announced, producer.options.wire, request.first_frame,
                         len(decision.routing), dict(decision.counts))
            else:
                log.info("scan %d: %s: no NodeGroup registered, writing %d sectors to %s", request.scan_number,
                         name, decision.announced, decision.file)
            outcome.result = producer.stream(source, positions, gate)
        except ProducerStopped as error:
            outcome.stopped, outcome.error = True, str(error)
        except (SectorflowError, ValueError, OSError) as error:  # ProducerError, RawFileError, ...
            outcome.error = str(error)
            log.error("scan %d: %s failed: %s", request.scan_number, name, error)
        except Exception as error:  # noqa: BLE001 - what no check foresaw fails this scan, not the daemon
            outcome.error = f"{type(error).__name__}: {error}"
            log.error("scan %d: %s failed: %s", request.scan_number, name, outcome.error)
        finally:
            gate.finish(producer.options.thread_id)  # also when begin_scan failed: no sibling waits for it

    def _summarise(self, scan: int, outcomes: list[ThreadOutcome], seconds: float) -> None:
        # The scan records the threads wrote are the account: sent + spilled + missing = owned.
        records = [producer.record() for producer in self._producers]
        owned = sum(record.owned for record in records)
        sent = sum(record.sent for record in records)
        spilled = sum(record.spilled for record in records)
        lost = sum(record.lost_upstream for record in records)
        missing = owned - sent - spilled
        files = [record.spill_file for record in records if record.spill_file]
        where = f" to {self.config.producer.fallback_dir}" if files else ""
        partial = sum(record.partial for record in records)
        line = (f"scan {scan}: receiver {self.receiver}, {owned} sectors in {seconds:.2f} s: sent {sent}, "
                f"spilled {spilled}{where}, missing {missing} ({lost} lost upstream)")
        if partial:
            line += f"; {partial} raw files incomplete (.partial)"
        stopped = any(outcome.stopped for outcome in outcomes)
        failed = [outcome.error for outcome in outcomes if outcome.error and not outcome.stopped]
        if stopped and scan in self._aborted and not self._stop.is_set():
            log.warning("%s; aborted (sectorflow abort)", line)
        elif stopped:
            log.warning("%s; interrupted by stop", line)
        elif failed:
            log.error("%s; %d of %d threads failed: %s", line, len(failed), len(outcomes), failed[0])
        elif missing != lost or any(record.routing and record.spilled for record in records):
            log.warning(line)  # spilled although streaming: the scan is not all in the counted file
        else:
            log.info(line)
