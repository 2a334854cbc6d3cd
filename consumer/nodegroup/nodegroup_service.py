"""The NodeGroup service of one MPI rank: G NodeGroups, their kvstore presence, the gather to rank 0.

``sectorflow nodegroup`` runs one :class:`NodeGroupService` per rank (one rank per node). Each
NodeGroup (:class:`LocalGroup`):

- binds one PULL socket per aggregator thread on ``[nodegroup] host`` (ports chosen by the OS),
- registers ``nodegroups/<uid>`` (a ``NodeGroupRecord``: uid, host, ports, node, rank, status,
  and the stack id its kvstore client last synced with) with ``[nodegroup] liveness_ttl_s``,
  refreshed by this rank's service loop (not the kvstore client's thread): a rank that dies or
  hangs loses its registrations within the ttl, and the other ranks, which watch them
  (job_watch.py), leave at once: the job is one unit. When the client finds its kvstore another
  stack (restarted without its log: an empty map), the loop registers again at its next turn,
  in the new stack, rather than a quarter ttl later,
- writes ``scans/<n>/nodegroup/<uid>`` (a ``NodeGroupScanRecord``) when its part of scan n is
  counted, with ``[kvstore] scan_record_ttl_s`` and no owner (it outlives the job),
- publishes ``status/nodegroup/<uid>`` (a ``ServiceStatus``) on every state change and at most
  every ``STATUS_INTERVAL_S`` while receiving, refusing or dropping late messages: state (the one
  state machine, ``sectorflow.service``: ``idle``, ``streaming`` (receiving a scan), ``counting``, ``writing`` (rank 0
  while it writes a file), ``finished``, ``stopping``), scan, messages, bytes, and the extra
  fields received / expected (current scan; -1 until every count came), frames_complete,
  frames_incomplete, pool_slots_in_use, pool_bytes (the received sectors held in assembly) and its
  high-water mark, what it refused (``malformed`` and
  ``malformed_<kind>``, the kinds of ``sectorflow.protocol.REFUSAL_KINDS``), late_messages,
  duplicate_sectors, evicted_frames, scans_timed_out, scans_evicted, pieces_during_scans_total
  (pieces of its parts handed to rank 0 while their scans ran: gather.RunningParts), repeated_infos (expected
  counts sent again, e.g. by a restarted aggregator: taken once), unannounced_scans and
  unannounced_messages (data of scans nobody announced: refused, below), who runs it (host, pid, the
  job's name job, the machine's id machine: sectorflow.ownership), and on rank 0 last_file;
  with ``[analysis] live`` also the live stream's endpoints, subscribers and drops (``live_*``,
  live/SPEC.md), published soon after a subscriber comes or goes,
- runs the NodeGroup's live publisher (``sectorflow.live.publisher``) and tells it when a scan
  is handed over,
- logs the first refused message of each kind once, and with each scan's summary line the
  messages refused since the previous scan,
- closes a scan aborted while the job runs (``sectorflow abort``) as soon as the relays' records say
  what they forwarded and it came, not after ``scan_timeout_s`` (abort_watch.py),
- closes the ports of a receiver whose producer threads all died mid-scan once they are found gone,
  not ``scan_timeout_s`` after its last sector (death_watch.py),
- hands its counted frames to rank 0 in pieces while a scan runs, and every finished scan's part (the
  last piece) to rank 0 (MPI point-to-point, never a collective per scan, so ranks
  whose NodeGroups are not in a scan's routing list never wait for it), if someone announced it:
  a scan with no request record (``scans/<n>/request``: written by ``sectorflow acquire``, or by the
  aggregator when a native receiver's stream begins a scan) and no producer scan record within one
  kvstore silence period of its end is refused, counted in the status and logged, and makes no record and no file.

Rank 0 writes ``FOURD_<scan:010d>_counted.h5`` (gather.py) and ``scans/<n>/file`` (a
``ScanFileRecord``: the outcome, the files, the sectors counted per receiver) for every scan, written
or failed, but for a run that brought no data to a scan recorded before: its record stays as it was.
Before any NodeGroup registers, rank 0 checks that it can write the output directory (and
``second_output_dir``): a job that cannot write registers nothing and exits with one line.

On SIGTERM/SIGINT or when ``duration_s`` has passed, every rank deregisters its NodeGroups at
once, stops them, sends rank 0 a goodbye, and closes its kvstore client, which deletes its other
keys; rank 0 writes what it holds and exits last. When another rank of the job vanished (killed,
hung), every surviving rank does the same, rank 0 writes what it holds with the missing NodeGroups
recorded (incomplete files), and the job exits 1.

Before any NodeGroup registers, every rank waits (up to ``STARTUP_SYNC_S``) for its replica: rank 0
refuses to start while a live NodeGroup of another job of this job's name (``--job``) serves the stack,
and every rank while a NodeGroup of another machine registered the host this rank advertises (two
machines with one ``gethostname()``); any refusal ends every rank with one line.

The UID of a NodeGroup is ``<node>-<pid>-r<rank>-g<index>``: unique per process and group.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sectorflow._core.nodegroup import (
    KernelChoice,
    NodeGroup,
    NodeGroupSettings,
    ThresholdSettings,
)
from sectorflow.configs import Config
from sectorflow.consumer.counting import make_calibration
from sectorflow.errors import SectorflowError, UsageError
from sectorflow.kvstore import Client
from sectorflow.analysis import detector_attrs, detectors_from, kernel_choices, kernel_columns, plan_of
from sectorflow.live.publisher import LivePublisher
from sectorflow.protocol import (
    OUTCOME_FAILED,
    STATE_COUNTING,
    STATE_ERROR,
    STATE_FINISHED,
    STATE_IDLE,
    STATE_STOPPED,
    STATE_STOPPING,
    STATE_STREAMING,
    STATE_WRITING,
    SERVICE_NODEGROUP,
    NodeGroupRecord,
    ServiceStatus,
    nodegroup_key,
    refusal_fields,
    scan_file_key,
    scan_nodegroup_key,
    scan_prefix,
    scan_request_key,
    status_key,
)
from sectorflow.ownership import machine_id, owner_fields, refuse_if_running
from sectorflow.protocol.scan_instrument import ScanInstrument, instrument_key
from sectorflow.protocol.scan_life import abort_key
from sectorflow.protocol.scan_parts import records_of
from sectorflow.security.options import aggregator_keys, data_client_curve, live_curve
from sectorflow.service import ServiceState
from sectorflow.socket_buffers import warn_if_capped
from sectorflow.waiting import WaitTimeout, wait_until

from .abort_watch import AbortWatch
from .tier_watch import TierWatch
from .death_watch import DeathWatch
from .gather import GroupResult, RunningParts, ScanGatherer, Unchanged, added_analyses
from .job_watch import JobWatch
from .launcher_watch import LauncherWatch
from .output_dir import FileAccess, check_writable
from .threshold_exchange import ThresholdExchange, statistics_from_dict

log = logging.getLogger(__name__)

#: Seconds between status publications while a scan is in progress.
STATUS_INTERVAL_S = 0.5
#: Seconds each loop waits for a finished scan (the loop's period when idle).
LOOP_WAIT_S = 0.05
#: MPI tags of the point-to-point messages to rank 0.
TAG_RESULT = 71
TAG_BYE = 72
#: A NodeGroup's closed threshold sample to rank 0, and the scan's thresholds from rank 0 (threshold_exchange).
TAG_SAMPLE = 73
TAG_THRESHOLDS = 74
#: Seconds rank 0 waits for the other ranks' goodbyes when stopping.
BYE_TIMEOUT_S = 10.0
#: Exit code of a job that left because one of its ranks vanished or its launcher is gone.
EXIT_SIBLING_GONE = 1
#: A job's name unless --job gives one: a stack serves one job of a name (sectorflow.ownership).
DEFAULT_JOB = "nodegroups"
MAX_JOB_BYTES = 64
#: Seconds each rank waits at start for its replica, to look for another job of its name (and
#: another machine of its host name) before registering; a kvstore that does not answer by then
#: is not waited for (the registrations go once it answers, as before), the checks are skipped.
STARTUP_SYNC_S = 10.0

#: NodeGroup counters published as they are in ``status/nodegroup/<uid>``.
PUBLISHED_COUNTERS = ("frames_complete", "frames_incomplete", "pool_slots_in_use", "pool_bytes",
                      "pool_bytes_high_water", "late_messages",
                      "duplicate_sectors", "evicted_frames", "scans_timed_out", "scans_evicted", "repeated_infos")



@dataclass(frozen=True)
class ServiceOptions:
    """What the command line may override over the configuration."""

    groups_per_rank: int
    counting_threads: int
    output_dir: Path
    duration_s: float = 0.0  # 0: until stopped
    second_output_dir: Path | None = None  # where a file goes that output_dir cannot take
    count: bool = True  # False: frames are assembled and written with no events (benchmarks)
    job: str = DEFAULT_JOB  # the job's name: one live job of a name per stack


def options_from(config: Config, groups_per_rank: int | None = None, threads: int | None = None,
                 output: str | os.PathLike[str] | None = None, duration_s: float = 0.0,
                 count: bool = True, job: str = "") -> ServiceOptions:
    """The service options: the ``[nodegroup]`` table, overridden by what is given."""
    ng = config.nodegroup
    groups = ng.groups_per_rank if groups_per_rank is None else groups_per_rank
    counting = ng.counting_threads if threads is None else threads
    if groups < 1:
        raise UsageError(f"--groups-per-rank {groups}: need at least 1 NodeGroup per rank")
    if counting < 1:
        raise UsageError(f"--threads {counting}: need at least 1 counting thread per NodeGroup")
    if duration_s < 0:
        raise UsageError(f"--duration {duration_s:g}: must be positive (or 0 for until stopped)")
    job = job or DEFAULT_JOB
    if len(job.encode()) > MAX_JOB_BYTES or not job.isprintable():
        raise UsageError(f"--job {job!r}: a name of 1 to {MAX_JOB_BYTES} printable bytes expected")
    return ServiceOptions(groups, counting, Path(output if output is not None else ng.output_dir), duration_s,
                          Path(ng.second_output_dir) if ng.second_output_dir else None, count, job)


def _load_map(path: str, key: str) -> np.ndarray | None:
    if not path:
        return None
    try:
        return np.load(path)
    except (OSError, ValueError) as error:
        raise SectorflowError(f"[counting] {key} = {path!r}: cannot load a .npy array ({error})") from None


def settings_from(config: Config, uid: str, counting_threads: int, count: bool = True,
                  share_thresholds: bool = False) -> NodeGroupSettings:
    """The C++ settings of one NodeGroup from the configuration.

    ``count=False`` assembles frames without counting them (the transport benchmark's data path).
    ``share_thresholds``: the NodeGroup is one of several in its job, which fit each scan's
    thresholds once from all their samples (``[counting] threshold_share_ms``; threshold_exchange).

    :raises SectorflowError: a dark reference or gain file that cannot be loaded or does not fit.
    :raises NodeGroupError: settings the NodeGroup cannot work with.
    """
    d, c, ng = config.detector, config.counting, config.nodegroup
    dark = _load_map(c.dark_reference, "dark_reference")
    gain = _load_map(c.gain, "gain")
    calibration = None
    if dark is not None or gain is not None:
        calibration = make_calibration((d.frame_rows, d.frame_cols), dark, gain)
    settings = NodeGroupSettings(
        uid=uid, host=ng.host, geometry=config.geometry(), receivers=config.n_receivers,
        aggregators=len(config.aggregator.hosts),
        producer_threads=[receiver.threads for receiver in config.receivers],
        counting_threads=counting_threads, recv_hwm=ng.recv_hwm, pool_frames=ng.pool_frames,
        scan_timeout_s=ng.scan_timeout_s,
        thresholds=ThresholdSettings(
            sample_frames=c.threshold_sample_frames, background_sigma=c.background_sigma,
            xray_sigma=c.xray_sigma, background_threshold=c.background_threshold, xray_threshold=c.xray_threshold,
            share_ms=c.threshold_share_ms if share_thresholds else 0,
        ),
        calibration=calibration,
        count=count,
        max_scan_positions=config.limits.max_scan_positions,
        max_open_scans=config.limits.max_open_scans,
        detectors=detectors_from(config),
        # The per-frame C++ kernels of the analyses the configuration runs (analysis/SPEC.md).
        kernels=[KernelChoice(name, settings) for name, settings in kernel_choices(plan_of(config).analyses)],
        live=config.analysis.live and config.analysis.virtual_images,
        live_buffer_frames=config.analysis.live_buffer_frames,
    )
    settings.rcvbuf_bytes = ng.rcvbuf_bytes
    # Each counting thread hands its counted frames out at its share of a piece: the NodeGroup
    # holds a piece or so of a scan's events while it runs, whatever the scan's size (LocalGroup.poll).
    settings.drain_events = max(1, ng.gather_piece_events // max(counting_threads, 1))
    warn_if_capped("[nodegroup] rcvbuf_bytes", ng.rcvbuf_bytes, "rmem_max")
    settings.curve = data_client_curve(config, "nodegroup")
    settings.aggregator_keys = aggregator_keys(config, "nodegroup")
    return settings


def analysis_fields(analysed: dict[str, tuple[int, float]]) -> dict[str, Any]:
    """A NodeGroup's status fields of its analyses: frames analysed and Python seconds, each since start."""
    out: dict[str, Any] = {}
    for name, (frames, seconds) in analysed.items():
        out[f"analysis_{name}_frames_total"] = frames
        out[f"analysis_{name}_seconds_total"] = round(seconds, 6)
    return out


def advertised_host(bind_host: str) -> str:
    """The address others connect to: the bind host, or this node's name for a wildcard."""
    return socket.gethostname() if bind_host in ("0.0.0.0", "*", "::") else bind_host


class LocalGroup:
    """One NodeGroup of this rank with its registration and status in the kvstore.

    :param config: the configuration.
    :param client: the rank's kvstore client (owns the keys: closing it deregisters).
    :param uid: the NodeGroup's uid.
    :param rank: MPI rank.
    :param counting_threads: counting threads of the NodeGroup.
    :param count: count electrons (False: assemble only, each frame written with no events).
    :param share_thresholds: fit each scan's thresholds with the job's other NodeGroups (settings_from).
    """

    def __init__(self, config: Config, client: Client, uid: str, rank: int, counting_threads: int,
                 count: bool = True, job: str = DEFAULT_JOB, share_thresholds: bool = False) -> None:
        self.config = config
        self.client = client
        self.uid = uid
        self.rank = rank
        # Who runs it, in its status: another job of its name, or another machine of its host name,
        # is refused at start (sectorflow.ownership).
        self.owner: dict[str, str | int] = {**owner_fields(), "job": job, "machine": machine_id()}
        self.host = advertised_host(config.nodegroup.host)
        self.node = socket.gethostname()
        self.group = NodeGroup(settings_from(config, uid, counting_threads, count, share_thresholds))
        # The analyses whose outputs this NodeGroup hands over with each scan (analysis/SPEC.md).
        self.plan = plan_of(config, detector_attrs(self.group.settings.detectors).get("detectors"))
        self._check_kernel_columns()
        a, d = config.analysis, config.detector
        self.live = LivePublisher(self.group, uid, config.nodegroup.host, self.host, (d.frame_rows, d.frame_cols),
                                  a.live_rate_hz, a.live_hwm, a.live_stall_s, live_curve(config),
                                  self.plan.context.detectors) if self.group.settings.live else None
        self.scan = 0
        self.last_file = ""
        # The science of what it counted, for /metrics: since it started, and its last scan's part.
        self.positions_total = 0
        self.electrons_total = 0
        # Per analysis of the plan: frames analysed and seconds of Python since start (status fields
        # analysis_<name>_frames_total, _seconds_total; the dashboard's metrics).
        self.analysed_total: dict[str, tuple[int, float]] = {}
        self.electrons_per_frame = 0.0
        self._published = 0.0
        self._published_dropped = (0, 0, 0)
        self._published_subscribers: dict[str, int] = {}
        self._logged_kinds: set[str] = set()
        self._refused_before = 0  # refusals counted up to the previous scan's summary
        self._registered_at: float | None = None  # when the registration was last written; None: not registered
        self._registered_stack = ""  # the stack id the registration last written names
        # Parts of scans whose request record the replica does not show yet, with the deadline after
        # which they are refused: a native scan's record is written as its data is forwarded, and the
        # replica may be a moment behind a tiny scan's whole stream.
        self._unconfirmed: dict[int, tuple[Any, float]] = {}
        kv = config.kvstore
        self._confirm_s = kv.heartbeat_ms * kv.silence_heartbeats / 1000
        self.unannounced_scans = 0
        self.unannounced_messages = 0
        # The running scans' frames taken from the NodeGroup as pieces of its parts (take_counted);
        # those of scans not yet announced wait here; the scans found announced.
        self.running = RunningParts(uid, rank, self.host, self.plan, config.nodegroup.gather_piece_events)
        self._held: dict[int, list[GroupResult]] = {}
        self._announced_scans: set[int] = set()
        # Pieces of parts handed over while their scans ran (status pieces_during_scans_total).
        self.pieces_during_scans = 0
        # Every transition updates the registration and publishes the status (its ports are bound).
        self.state = ServiceState(log, publish=self._published_state, name=f"nodegroup {uid}")
        self.transition(STATE_IDLE)

    def _check_kernel_columns(self) -> None:
        """Stop here, not at the first scan's gather, when an analysis reads a column its C++ kernel
        does not make (its per-position outputs' live names against NodeGroup.columns)."""
        if self.group.settings.detectors is None:
            return
        made = list(self.group.columns)
        missing = [c for c in kernel_columns(self.plan.analyses, self.plan.context) if c not in made]
        if missing:
            self.group.stop()
            raise SectorflowError(f"nodegroup {self.uid}: no NodeGroup kernel makes column(s) {', '.join(missing)} "
                                  f"(they make {', '.join(made)}): an analysis's per-position outputs are named as "
                                  "its kernel's columns (analysis/SPEC.md)")

    @property
    def ports(self) -> list[int]:
        return list(self.group.ports)

    def record(self, state: str) -> NodeGroupRecord:
        # The stack is the client's last sync's ("" before the first: the field is left out).
        return NodeGroupRecord(uid=self.uid, host=self.host, ports=self.ports, node=self.node, rank=self.rank,
                               status=state, stack_id=self.client.stack_id)

    def transition(self, state: str) -> None:
        """Enter ``state`` (the one state machine): logged, registration updated, status published.

        While stopping, what finishes the work already queued (writing its files) leaves the state
        at stopping.
        """
        if self.state.state == STATE_STOPPING and state != STATE_STOPPED:
            return
        self.state.enter(state, why=f"scan {self.scan}")

    def _published_state(self, state: str) -> None:
        # Status first: a sibling that sees the registration go reads the status to tell a clean
        # leave (stopping) from a death.
        self.publish(state)
        self.register(state)

    def register(self, state: str | None = None) -> None:
        """Write the registration ``nodegroups/<uid>`` (ttl ``[nodegroup] liveness_ttl_s``, no owner:
        only this rank's loop keeps it, through :meth:`refresh`); erase it once stopping."""
        state = state or self.state.state
        key = nodegroup_key(self.uid)
        if state in (STATE_STOPPING, STATE_STOPPED):
            if self._registered_at is not None:
                self.client.erase(key)
                self._registered_at = None
            return
        record = self.record(state)
        self.client.set_once(key, record.encode(), self.config.nodegroup.liveness_ttl_s)
        self._registered_at = time.monotonic()
        self._registered_stack = record.stack_id

    def refresh(self, now: float) -> None:
        """Called by the service loop: rewrite the registration every quarter of its ttl, and at once
        when the client synced with another stack than the registration names. A set_once key is not
        the client's own: a kvstore restarted without its log has lost it, and a registration
        written while the client was still syncing with the new server names the old stack."""
        if self._registered_at is None:
            return
        if (self.client.stack_id != self._registered_stack
                or now - self._registered_at >= self.config.nodegroup.liveness_ttl_s / 4):
            self.register()

    def finished(self, result: Any) -> list[GroupResult]:
        """A finished scan's part: its record ``scans/<n>/nodegroup/<uid>`` written, ready for rank 0,
        after the pieces of it counted while the scan ran not yet handed over (held until the scan
        was announced). The part is its last piece (RunningParts.part)."""
        held = self._held.pop(result.scan_number, [])
        self._announced_scans.discard(result.scan_number)
        part, positions, electrons = self.running.part(result)
        self.positions_total += positions
        self.electrons_total += electrons
        self.analysed_total = added_analyses(self.analysed_total, part.analysed)
        if positions:
            self.electrons_per_frame = electrons / positions
        if self.live is not None:
            self.live.scan_finished(part.scan_number, (part.scan_y, part.scan_x))
        self.client.set_once(scan_nodegroup_key(part.scan_number, self.uid), part.scan_record().encode(),
                             self.config.kvstore.scan_record_ttl_s)
        return [*held, part]

    def take_counted(self) -> list[GroupResult]:
        """The frames counted while their scans run, as pieces of their parts for rank 0 once they
        hold ``[nodegroup] gather_piece_events`` events (RunningParts.take): the NodeGroup holds about a
        piece of a running scan, not its whole part. Pieces of a scan not announced yet are held here
        until it is (those of a scan refused as unannounced are dropped)."""
        for scan, pieces in self.running.take(self.group).items():
            self._held.setdefault(scan, []).extend(pieces)
        out: list[GroupResult] = []
        for scan in list(self._held):
            if scan in self._announced_scans or self._announced(scan):
                self._announced_scans.add(scan)
                pieces = self._held.pop(scan)
                self.pieces_during_scans += len(pieces)
                out.extend(pieces)
        return out

    def publish(self, state: str | None = None) -> None:
        """Publish ``status/nodegroup/<uid>`` now (in ``state``, by default the current one)."""
        counters = self.group.counters()
        progress = [p for p in self.group.progress() if p.scan == self.scan]
        extra: dict[str, Any] = {
            "received": int(progress[0].received) if progress else 0,
            "expected": int(progress[0].expected) if progress else 0,
            "rank": self.rank,
            "unannounced_scans": self.unannounced_scans,
            "unannounced_messages": self.unannounced_messages,
            "positions_total": self.positions_total,
            "electrons_total": self.electrons_total,
            "pieces_during_scans_total": self.pieces_during_scans,
            **analysis_fields(self.analysed_total),
            "electrons_per_frame": round(self.electrons_per_frame, 3),
            **self.owner,
            **{key: int(counters[key]) for key in PUBLISHED_COUNTERS},
            **refusal_fields(counters["malformed"]),
        }
        if self.last_file:
            extra["last_file"] = self.last_file
        if self.live is not None:
            extra.update(self.live.status_fields())
            self._published_subscribers = dict(self.live.subscribers)
        status = ServiceStatus(state=state or self.state.state, scan=self.scan, messages=int(counters["messages"]),
                               bytes=int(counters["bytes"]), extra=extra)
        self.client.set(status_key("nodegroup", self.uid), status.encode(), self.config.kvstore.ttl_s)
        self._published = time.monotonic()
        self._published_dropped = self._dropped(counters)

    def poll(self, timeout_s: float) -> list[GroupResult]:
        """The pieces of running scans' parts counted so far (take_counted), then wait up to
        ``timeout_s`` for a finished scan (its part: the last piece); update the state and status meanwhile."""
        pieces = self.take_counted()
        result = self.group.wait_scan(timeout_s)
        self._log_new_refusals()
        if result is not None and not self._announced(result.scan_number):
            self._unconfirmed[result.scan_number] = (result, time.monotonic() + self._confirm_s)
            result = None
        if result is None and self._unconfirmed:
            result = self._confirmed()
        if result is not None:
            self.scan = result.scan_number
            parts = self.finished(result)
            part = parts[-1]
            refused = self._refused_total()
            since = refused - self._refused_before
            self._refused_before = refused
            log.info("%s%s", part.describe(),
                     f"; {since} messages refused since the previous scan (malformed_* in its status)" if since else "")
            self.transition(STATE_FINISHED)
            self.publish()  # the scan number changed even if the state did not
            return pieces + parts
        progress = self.group.progress()
        if progress:
            self.scan = max(p.scan for p in progress)
        if any(not p.arrived for p in progress):
            self.transition(STATE_STREAMING)
        elif progress or self.group.scans_counting:
            self.transition(STATE_COUNTING)
        # Dropped messages come whatever the state (a peer sends bad input, or a stray part of a
        # written scan, to an idle NodeGroup): they are published too, at the same bounded rate.
        busy = self.state.state in (STATE_STREAMING, STATE_COUNTING) or \
            self._dropped(self.group.counters()) != self._published_dropped
        # A subscriber that came or went: the status says so soon (a viewer waits for it before a scan).
        busy = busy or (self.live is not None and self.live.subscribers != self._published_subscribers)
        if busy and time.monotonic() - self._published >= STATUS_INTERVAL_S:
            self.publish()
        return pieces

    def remaining(self) -> list[GroupResult]:
        """Once stopped: the parts finished and not yet handed over, each with its record written;
        those of scans nobody announced are refused now (counted), without waiting."""
        results = [result for result, _ in self._unconfirmed.values()]
        self._unconfirmed.clear()
        while (result := self.group.wait_scan(0.0)) is not None:
            results.append(result)
        parts = self.take_counted()
        for result in results:
            if self._announced(result.scan_number):
                parts.extend(self.finished(result))
            else:
                self._refuse_unannounced(result)
        return parts

    def _announced(self, scan: int) -> bool:
        """Whether someone asked for ``scan``: ``sectorflow acquire`` (or a replay) wrote its request
        record, or the aggregator did as a native receiver's stream began it, or a producer thread
        wrote its scan record before streaming (a receiver program embedding the producer library
        streams scans no acquire asked for)."""
        return (self.client.get(scan_request_key(scan)) is not None
                or bool(self.client.subtree(scan_prefix(scan) + "producer/")))

    def _confirmed(self) -> Any:
        """A held part whose request record has come since, or None; refuses those past their deadline."""
        now = time.monotonic()
        for scan, (result, deadline) in list(self._unconfirmed.items()):
            if self._announced(scan):
                del self._unconfirmed[scan]
                return result
            if now >= deadline:
                del self._unconfirmed[scan]
                self._refuse_unannounced(result)
        return None

    def _refuse_unannounced(self, result: Any) -> None:
        """Data of a scan nobody announced (a peer writing to a data port, a stray header) makes no
        file and no record: a valid header alone would otherwise make rank 0 write a scan of its
        shape, empty. It is counted in the status, and logged."""
        messages = int(sum(result.received))
        # Its pieces counted while it ran go nowhere either.
        self._held.pop(result.scan_number, None)
        self.running.drop(result.scan_number)
        self.unannounced_scans += 1
        self.unannounced_messages += messages
        log.warning("nodegroup %s: scan %d: %d messages of a scan nobody announced (no %s: no acquire, no native "
                    "receiver's stream through the aggregator): refused, no file written (status "
                    "unannounced_scans, unannounced_messages)", self.uid, result.scan_number, messages,
                    scan_request_key(result.scan_number))
        self.publish()

    def _refused_total(self) -> int:
        return int(sum(self.group.counters()["malformed"].values()))

    @staticmethod
    def _dropped(counters: dict[str, Any]) -> tuple[int, int, int]:
        """What the NodeGroup dropped, as its status shows it: refused, late, repeated counts."""
        return (int(sum(counters["malformed"].values())), int(counters["late_messages"]),
                int(counters["repeated_infos"]))

    def _log_new_refusals(self) -> None:
        """Log the first refused message of each kind, once: the counters say how many followed."""
        for kind, what in self.group.counters()["first_malformed"].items():
            if kind not in self._logged_kinds:
                self._logged_kinds.add(kind)
                log.warning("nodegroup %s: refused a message (%s): %s; further ones of this kind are only counted "
                            "(status/nodegroup/%s malformed_%s)", self.uid, kind, what, self.uid, kind)

    def stop(self) -> None:
        self.group.stop()
        if self.live is not None:
            self.live.close()


class NodeGroupService:
    """The NodeGroups of one MPI rank and, on rank 0, the writing of the scan files.

    :param config: the configuration.
    :param options: groups per rank, counting threads, output directories, duration.
    :param comm: an mpi4py communicator (``MPI.COMM_WORLD``).
    """

    def __init__(self, config: Config, options: ServiceOptions, comm: Any) -> None:
        self.config = config
        self.options = options
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.client = Client.from_config(config, name=f"nodegroup-r{self.rank}", role="nodegroup")
        self.groups: list[LocalGroup] = []
        self.gatherer: ScanGatherer | None = None
        # Several NodeGroups in the job fit each scan's thresholds once (rank 0's exchange).
        self.sharing = (options.count and config.counting.threshold_share_ms > 0
                        and self.size * options.groups_per_rank > 1)
        self.exchange: ThresholdExchange | None = None
        self.watch: JobWatch | None = None
        self.launcher = LauncherWatch()
        self.launcher_gone = False
        # Ranks that gave rank 0 no goodbye when it stopped: MPI_Finalize would wait for them forever.
        self.silent_ranks = 0
        self.aborts: AbortWatch | None = None
        self.tier: TierWatch | None = None
        self.deaths: DeathWatch | None = None

    def start(self) -> list[str]:
        """Check the output directories, bind and register this rank's NodeGroups; learn every
        rank's uids. Returns all uids.

        :raises SectorflowError: rank 0 cannot write its output directory (on every rank: no
            NodeGroup of the job registers).
        """
        error = self._check_output() if self.rank == 0 else None
        # Every rank looks before any registers; any refusal ends every rank with it.
        error = error or self._check_alone()
        error = next((e for e in self.comm.allgather(error) if e), None)
        if error:
            raise SectorflowError(error)
        node = socket.gethostname()
        for index in range(self.options.groups_per_rank):
            uid = f"{node}-{os.getpid()}-r{self.rank}-g{index}"
            self.groups.append(LocalGroup(self.config, self.client, uid, self.rank, self.options.counting_threads,
                                          self.options.count, self.options.job, self.sharing))
            log.info("nodegroup %s: listening on %s ports %s", uid, self.groups[-1].host, self.groups[-1].ports)
        self.aborts = AbortWatch(self.client, [receiver.threads for receiver in self.config.receivers], self.groups)
        self.deaths = DeathWatch(self.client, self.config, self.groups)
        self.tier = TierWatch(self.client, len(self.config.aggregator.hosts), self.config.n_receivers, self.groups)
        uids_by_rank = self.comm.allgather([g.uid for g in self.groups])
        job_uids = sorted(uid for uids in uids_by_rank for uid in uids)
        self.watch = JobWatch(self.client.get, self.client.synced, uids_by_rank, self.rank,
                              self.config.nodegroup.liveness_ttl_s)
        if self.rank == 0 and self.sharing:
            c = self.config.counting
            self.exchange = ThresholdExchange(job_uids, c.background_sigma, c.xray_sigma, c.threshold_share_ms / 1000)
        if self.rank == 0:
            d = self.config.detector
            thresholds = self.groups[0].group.settings.thresholds
            self.gatherer = ScanGatherer(
                job_uids, self.options.output_dir, (d.frame_rows, d.frame_cols),
                gather_timeout_s=2 * self.config.nodegroup.scan_timeout_s + 5.0,
                counting={
                    "dark_reference_applied": bool(self.config.counting.dark_reference),
                    "gain_applied": bool(self.config.counting.gain),
                    "row_dark": "none",
                    "threshold_sample_frames": thresholds.sample_frames,
                },
                receivers=self.config.n_receivers,
                sector_shape=(d.sector_rows, d.sector_cols),
                second_output_dir=self.options.second_output_dir,
                write_retry_s=self.config.nodegroup.write_retry_s,
                plan=self.groups[0].plan,
                aborted=lambda scan: self.client.get(abort_key(scan)) is not None,
                instrument=self._instrument,
                access=self._file_access(),
                compression=self.config.nodegroup.compression,
            )
            log.info("job of %d ranks, %d NodeGroups; files go to %s%s", self.size, len(job_uids),
                     self.options.output_dir,
                     f" (or {self.options.second_output_dir})" if self.options.second_output_dir else "")
        return job_uids

    def _check_alone(self) -> str | None:
        """Why this rank must not register: another live job of this job's name (rank 0 looks), or a
        NodeGroup of another machine that advertises the host name this rank would (two machines with
        one ``gethostname()``: the relays would send this one's sectors there); None if neither."""
        kv = self.config.kvstore
        if not self.client.wait_synced(STARTUP_SYNC_S):
            log.warning("kvstore at %s did not answer within %g s: registering without looking for another job "
                        "named %r", kv.address, STARTUP_SYNC_S, self.options.job)
            return None
        statuses = self.client.statuses(SERVICE_NODEGROUP)
        try:
            if self.rank == 0:
                refuse_if_running(statuses, lambda _uid, status: status.extra.get("job") == self.options.job,
                                  f"NodeGroup job {self.options.job!r} of this stack", stack=self.client.stack_id)
        except SectorflowError as error:
            return str(error)
        advertised, machine = advertised_host(self.config.nodegroup.host), machine_id()
        registered = {record.uid: record for record in self.client.nodegroups()}
        for (_, uid), status in sorted(statuses.items()):
            theirs = status.extra.get("machine")
            record = registered.get(uid)
            if (record is None or record.host != advertised or status.state in (STATE_STOPPING, STATE_STOPPED)
                    or not isinstance(theirs, str) or not theirs or not machine or theirs == machine):
                continue
            return (f"NodeGroup {uid} of another machine ({status.extra.get('host')}, machine id {theirs[:12]}) "
                    f"advertises the host {advertised!r} this rank would: two machines with one host name; set "
                    f"[nodegroup] host to an address of this node")
        return None

    def _instrument(self, scan: int) -> dict[str, dict[str, Any]]:
        """The scan's known instrument settings for its file: ``scans/<n>/instrument`` as acquire wrote it
        (a key, or a part of the scan's summary once an earlier run of it was over and folded: a
        replay's), else (a scan requested without it, a record that does not decode: logged) this
        configuration's."""
        records = records_of(self.client.subtree(scan_prefix(scan)), scan)
        refused = records.rejected.get(instrument_key(scan))
        if refused:
            log.warning("scan %d: %s; its file records the configuration's [instrument]", scan, refused)
        elif records.instrument is not None:
            return records.instrument.known()
        return ScanInstrument.of(self.config.instrument).known()

    def _file_access(self) -> FileAccess:
        """The counted files' mode and group ([nodegroup] file_mode, file_group)."""
        return FileAccess.from_config(self.config.nodegroup.file_mode_bits, self.config.nodegroup.file_group)

    def _check_output(self) -> str | None:
        """Why rank 0 cannot write its files, or None."""
        try:
            access = self._file_access()
            check_writable(self.options.output_dir, "output directory", access)
            if self.options.second_output_dir is not None:
                check_writable(self.options.second_output_dir, "[nodegroup] second_output_dir", access)
        except SectorflowError as error:
            return str(error)
        return None

    def run(self, stop: threading.Event) -> int:
        """Serve scans until ``stop`` is set, the duration has passed, another rank of the job left
        or the job's launcher is gone; then leave cleanly. Returns the exit code: 0, or 1 when
        another rank vanished or the launcher is gone."""
        assert self.watch is not None
        deadline = time.monotonic() + self.options.duration_s if self.options.duration_s else None
        try:
            while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                self._step(LOOP_WAIT_S / len(self.groups))
                if self.aborts is not None:
                    self.aborts.check()
                if self.deaths is not None:
                    self.deaths.check()
                if self.tier is not None:
                    self.tier.check()
                self._refresh()
                if self.launcher.gone():
                    log.error("the job's launcher is gone (its PMI connection, fd %s, hung up): this rank's "
                              "NodeGroups leave", self.launcher.fd)
                    self.launcher_gone = True
                    break
                gone = self.watch.check()
                if gone is not None:
                    if gone.died:
                        log.error("%s: this job's NodeGroups leave", gone.describe())
                    else:
                        log.info("%s: this job's NodeGroups leave too", gone.describe())
                    break
        finally:
            self._leave()
        return EXIT_SIBLING_GONE if self.watch.dead_ranks() or self.launcher_gone or self.silent_ranks else 0

    def dead_ranks(self) -> set[int]:
        """The other ranks found dead or hung."""
        return self.watch.dead_ranks() if self.watch is not None else set()

    def _refresh(self) -> None:
        now = time.monotonic()
        for group in self.groups:
            group.refresh(now)

    @contextmanager
    def _kept_registered(self) -> Iterator[None]:
        """While the loop writes a file (seconds for a large scan), a thread it starts for the
        write refreshes the registrations: the loop is busy, not hung."""
        done = threading.Event()

        def refresh() -> None:
            while not done.wait(self.config.nodegroup.liveness_ttl_s / 4):
                self._refresh()

        thread = threading.Thread(target=refresh, name="registrations-during-write", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def _step(self, wait_s: float) -> None:
        for group in self.groups:
            for part in group.poll(wait_s):
                if self.rank == 0:
                    assert self.gatherer is not None
                    self.gatherer.add(part)
                else:
                    self._send(part)
        if self.rank == 0:
            self._receive()
        self._share_thresholds()
        if self.rank == 0:
            self._write_ready()

    def _share_thresholds(self) -> None:
        """Hand this rank's closed threshold samples to rank 0; give the scans' thresholds, once
        fitted, to this rank's NodeGroups (rank 0 also to the other ranks): threshold_exchange."""
        if not self.sharing:
            return
        for group in self.groups:
            for scan, sample in group.group.take_samples():
                if self.exchange is not None:
                    self.exchange.add(scan, group.uid, sample)
                else:
                    self.comm.send((scan, group.uid, sample), dest=0, tag=TAG_SAMPLE)
        if self.exchange is not None:
            dead = self.dead_ranks()
            for scan, statistics in self.exchange.due():
                self._adopt(scan, statistics)
                for rank in range(1, self.size):
                    if rank not in dead:
                        self.comm.send((scan, statistics), dest=rank, tag=TAG_THRESHOLDS)
            return
        while self.comm.Iprobe(source=0, tag=TAG_THRESHOLDS):
            scan, statistics = self.comm.recv(source=0, tag=TAG_THRESHOLDS)
            self._adopt(scan, statistics)

    def _adopt(self, scan: int, statistics: dict[str, Any]) -> None:
        decided = statistics_from_dict(statistics)
        for group in self.groups:
            group.group.adopt_thresholds(scan, decided)

    def _send(self, part: GroupResult) -> None:
        """A part to rank 0, in pieces of bounded size: rank 0 writes each as it comes (gather.py)."""
        for piece in part.split(self.config.nodegroup.gather_piece_events):
            self.comm.send(piece, dest=0, tag=TAG_RESULT)

    def _receive(self) -> int:
        """Take the parts other ranks sent; returns the goodbyes among them."""
        from mpi4py import MPI

        byes = 0
        status = MPI.Status()
        while self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
            message = self.comm.recv(source=status.Get_source(), tag=status.Get_tag())
            if status.Get_tag() == TAG_BYE:
                byes += 1
            elif status.Get_tag() == TAG_SAMPLE:
                if self.exchange is not None:
                    self.exchange.add(*message)
            else:
                assert self.gatherer is not None
                self.gatherer.add(message)
        return byes

    def _write_ready(self, flush: bool = False) -> None:
        assert self.gatherer is not None
        for scan_number in self.gatherer.ready(flush=flush):
            for group in self.groups:
                group.scan = scan_number
                group.transition(STATE_WRITING)
            with self._kept_registered():
                record = self.gatherer.write(scan_number, final=flush)
            if record is None:
                continue  # not written anywhere yet: retried
            if isinstance(record, Unchanged):
                # Nothing written: publishing would replace a finished scan's record (the gatherer logged why).
                for group in self.groups:
                    group.transition(STATE_FINISHED)
                    group.publish()
                continue
            self.client.set_once(scan_file_key(scan_number), record.encode(), self.config.kvstore.scan_record_ttl_s)
            for group in self.groups:
                if record.path:
                    group.last_file = record.path
                group.transition(STATE_ERROR if record.outcome == OUTCOME_FAILED else STATE_FINISHED)
                group.publish()

    def _leave(self) -> None:
        assert self.watch is not None
        # Deregistered at once (the status says stopping first): no scan is routed here any more.
        for group in self.groups:
            group.transition(STATE_STOPPING)
        rank0_gone = 0 in self.watch.dead_ranks()
        unsent = 0
        for group in self.groups:
            group.stop()
            # Scans finished before the stop still reach their file.
            for part in group.remaining():
                if self.rank == 0:
                    assert self.gatherer is not None
                    self.gatherer.add(part)
                elif rank0_gone:
                    unsent += 1
                else:
                    self._send(part)
        if unsent:
            log.error("rank 0 is gone: %d finished parts are in no file (scans/<n>/nodegroup/<uid> says what they "
                      "counted)", unsent)
        if self.rank != 0:
            if not rank0_gone:
                self.comm.send(None, dest=0, tag=TAG_BYE)
        else:
            byes = 0
            expected = self.size - 1 - len(self.watch.dead_ranks())

            def all_said_goodbye() -> bool:
                nonlocal byes
                byes += self._receive()
                return byes >= expected

            try:
                wait_until(all_said_goodbye, BYE_TIMEOUT_S, "the other ranks' goodbyes", LOOP_WAIT_S)
            except WaitTimeout:
                # Seen under scancel: Hydra's proxy killed one rank's wrapper before it passed the
                # stop on, and that rank's container served on until the proxy was gone.
                self.silent_ranks = expected - byes
                log.error("stopping without the goodbye of %d ranks: the job ends by MPI_Abort (MPI_Finalize "
                          "would wait for them)", self.silent_ranks)
            # Scans still waiting for parts are written with the missing NodeGroups recorded.
            self._write_ready(flush=True)
        for group in self.groups:
            group.transition(STATE_STOPPED)
        self.client.close()
        log.info("deregistered %d NodeGroups; bye", len(self.groups))


__all__ = ["LocalGroup", "NodeGroupService", "ServiceOptions", "options_from", "settings_from"]
