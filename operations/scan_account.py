"""The account of one scan: where each of its sectors ended, from the scan's records in the kvstore.

Every party that handles a scan writes its part under ``scans/<n:010d>/`` (kvstore/SPEC.md, "Scan
records"). This module is the one place that adds them up: a sector of the scan is counted (in the
file record's ``sectors_counted``), spilled (a producer thread's ``spilled`` while streaming: whole
records in a raw file on its receiver, under a fault), on disk (a producer thread's ``spilled`` when
no NodeGroup was registered: written to raw files as planned, not counted; ``sectorflow acquire
--replay`` counts it), pending (the scan still runs: not yet due) or missing, and for the missing ones
the chain producer -> aggregator -> NodeGroup -> file says where they were last seen. While a scan
runs, only what is already certain is missing (lost upstream, not sent by a thread that ended or died,
dropped at the aggregator); the rest is pending. ``sectorflow acquire --wait``, ``sectorflow status``
and the dashboard show the same account in the same words; acquire takes its exit code from here.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sectorflow._core import protocol as _records
from sectorflow.protocol import OUTCOME_ABORTED, SERVICE_LIBERTEM
# A scan's records and its abandoned producer threads are the records' own (protocol/scan_parts.py,
# read by services too); the account's readers take them from here as well (explicit re-exports).
from sectorflow.protocol.scan_parts import FINAL_PRODUCER_STATES, SOURCE_NATIVE, ScanRecords, relay_thread
from sectorflow.protocol.scan_parts import PRODUCER_QUIET_S as PRODUCER_QUIET_S
from sectorflow.protocol.scan_parts import abandoned_producers as abandoned_producers
from sectorflow.protocol.scan_parts import records_of as records_of
from sectorflow.protocol.scan_parts import scans_in as scans_in

# The outcome of a scan as acquire and status report it.
COMPLETE = _records.OUTCOME_COMPLETE      # every sector counted in the file
SPILLED = "spilled"        # nothing missing, but a fault sent some sectors to raw files: replay completes the file
ON_DISK = "on disk, not counted"  # no NodeGroup was registered: every sector in raw files, as planned; replay counts it
INCOMPLETE = _records.OUTCOME_INCOMPLETE  # sectors missing
FAILED = _records.OUTCOME_FAILED          # no file was written
PENDING = "pending"        # not over yet
ABORTED = OUTCOME_ABORTED    # an operator aborted it (sectorflow abort) before every sector was counted

# `sectorflow acquire --wait`'s exit code by outcome (2 is taken by usage errors).
EXIT_CODES = {COMPLETE: 0, ON_DISK: 0, SPILLED: 3, INCOMPLETE: 1, FAILED: 1, PENDING: 1, ABORTED: 4}

SOURCE_REPLAY = _records.SOURCE_REPLAY
LIBERTEM_SERVICE = SERVICE_LIBERTEM  # status/libertem/<name>: libertem_bridge/status.py
# Who writes a request: acquire, or the aggregator when a native stream opens a run (with
# native_scans_requested = false); a refused write is the kvstore's (kvstore_full says so).
NO_REQUEST = ("no request record (no 'sectorflow acquire' asked for the scan and no native stream began it, "
              "or its records expired or were refused)")


@dataclass
class ReceiverAccount:
    """One receiver's sectors of the scan."""

    receiver: int
    sectors: int
    counted: int = 0
    spilled: int = 0   # in raw files because of a fault while streaming
    on_disk: int = 0   # in raw files as planned: no NodeGroup was registered
    pending: int = 0   # not yet due: the scan still runs
    sent: int = 0      # handed to the aggregator so far (the producers' progress)
    reasons: list[str] = field(default_factory=list)  # where the missing ones were last seen

    explained: int = 0  # of the missing ones, how many the reasons place

    @property
    def missing(self) -> int:
        return self.sectors - self.counted - self.spilled - self.on_disk - self.pending

    @property
    def moved(self) -> int:
        """The sectors out of the producers' hands so far: sent, spilled or written to disk."""
        return self.sent + self.spilled + self.on_disk

    def explain(self, count: int, where: str) -> None:
        """Places up to ``count`` of the missing sectors not placed yet ``where``, along the chain.

        A count is capped by what is still unexplained: a stage's shortfall can include sectors a
        later stage recovered (a restarted aggregator counts only its own messages).
        """
        placed = min(count, self.missing - self.explained)
        if placed > 0:
            self.explained += placed
            self.reasons.append(f"{placed} {where}")


@dataclass
class ScanAccount:
    """Where every sector of a scan ended, and the outcome that follows."""

    scan: int
    outcome: str
    receivers: list[ReceiverAccount]
    path: str = ""                       # the counted file
    extra_paths: list[str] = field(default_factory=list)
    spill_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the file and the NodeGroups said
    kvstore_full: str = ""  # what the kvstore refused for capacity, when a pending account may owe it to that
    planned_on_disk: bool = False  # no NodeGroup was registered: the producers wrote the scan to raw files
    shape: tuple[int, int] = (0, 0)  # scan_x, scan_y (0, 0 without a request record)
    died: list[str] = field(default_factory=list)  # producer threads (r<R>t<T>) gone with their part unfinished

    @property
    def sectors(self) -> int:
        return sum(r.sectors for r in self.receivers)

    @property
    def counted(self) -> int:
        return sum(r.counted for r in self.receivers)

    @property
    def spilled(self) -> int:
        return sum(r.spilled for r in self.receivers)

    @property
    def missing(self) -> int:
        return sum(r.missing for r in self.receivers)

    @property
    def on_disk(self) -> int:
        return sum(r.on_disk for r in self.receivers)

    @property
    def pending(self) -> int:
        return sum(r.pending for r in self.receivers)

    @property
    def sent(self) -> int:
        return sum(r.sent for r in self.receivers)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    def replay_command(self, config: str = "") -> str:
        """The command that streams the scan's raw files to the registered NodeGroups, which count it.

        Args:
            config: the configuration file the stack runs with (``config_argument(config.source)``);
                "" leaves --config out.
        """
        words = ["sectorflow", "acquire", *(["--config", config] if config else []), "--scan-number", str(self.scan),
                 "--scan-shape", f"{self.shape[0]}x{self.shape[1]}", "--replay", "--wait"]
        return shlex.join(words)

    @property
    def replayable(self) -> bool:
        """Over, planned to disk and with sectors on disk: a replay is what counts it."""
        return self.planned_on_disk and self.outcome != PENDING and self.on_disk > 0

    def fates(self) -> str:
        """Where the sectors are, in the account's words: ``A counted + B spilled + C missing = N sectors``."""
        words = ([(self.on_disk, "on disk")] if self.planned_on_disk else
                 [(self.counted, "counted"), (self.spilled, "spilled")])
        words.append((self.missing, "missing"))
        if self.outcome == PENDING:
            words.append((self.pending, "pending"))
        return " + ".join(f"{count} {word}" for count, word in words) + f" = {self.sectors} sectors"

    def line(self, config: str = "") -> str:
        """One line: outcome, where the sectors are, and the file (or for a scan on disk, the replay
        command, with ``config`` as in ``replay_command``)."""
        outcome = f"kvstore full: {self.kvstore_full}" if self.outcome == PENDING and self.kvstore_full else self.outcome
        text = f"scan {self.scan}: {outcome}: {self.fates()}"
        if self.replayable:
            return text + f"; count it with: {self.replay_command(config)}"
        return text + (f"; file {self.path}" if self.path else "")

    def died_line(self) -> str:
        """The producer threads that died mid-scan, in the words acquire logs and status and the
        dashboard show; "" if none did."""
        if not self.died:
            return ""
        many = len(self.died) > 1
        return (f"scan {self.scan}: producer{'s' if many else ''} {', '.join(self.died)} died mid-scan: "
                f"{'their' if many else 'its'} unsent sectors are missing")

    def breakdown(self) -> list[str]:
        """The account by receiver, where the missing sectors were last seen, the files."""
        lines = []
        for r in self.receivers:
            fates = ([f"{r.on_disk} on disk"] if self.planned_on_disk else [f"{r.counted} counted", f"{r.spilled} spilled"])
            fates.append(f"{r.missing} missing")
            if self.outcome == PENDING:
                fates.append(f"{r.pending} pending")
            lines.append(f"  receiver {r.receiver}: {', '.join(fates)}" + (f" ({'; '.join(r.reasons)})" if r.reasons else ""))
        lines += [f"  {note}" for note in self.notes]
        lines += [f"  other file of the scan: {path}" for path in self.extra_paths]
        written = "written to" if self.planned_on_disk else "spilled to"
        lines += [f"  {written} {path}" for path in self.spill_files]
        return lines


def config_argument(source: str) -> str:
    """What ``--config`` takes to name the configuration loaded from ``source`` (``Config.source``)
    from any directory: its absolute path; "" for one that came from no file."""
    if not source or source.startswith("<"):
        return ""
    return str(Path(source).resolve())


def producers_final(records: ScanRecords, producers_gone: Set[tuple[int, int]] = frozenset()) -> bool:
    """Every producer thread the request names has ended its part (finished or failed) or is gone.

    A native scan's senders are the detector's own receivers, which write no records: they are
    done as far as the account can know."""
    if records.request is None:
        return False
    if records.request.source == SOURCE_NATIVE:
        return True
    for receiver, threads in enumerate(records.request.producer_threads):
        for thread in range(threads):
            part = records.producers.get((receiver, thread))
            ended = part is not None and part.state in FINAL_PRODUCER_STATES
            if not ended and (receiver, thread) not in producers_gone:
                return False
    return True


def kvstore_full(server_status: bytes | None) -> str:
    """What the kvstore server refused of the stack's own records for capacity (its status,
    ``status/kvstore/server``), or "" if nothing: a scan whose records were refused stays pending."""
    if server_status is None:
        return ""
    try:
        refused = int(_records.ServiceStatus.decode(server_status).extra.get("refused_stack", 0))
    except _records.ProtocolError:
        return ""
    if refused <= 0:
        return ""
    return (f"{refused} of the stack's records refused, its room holds no older scan to erase "
            "([kvstore] max_stack_keys, max_stack_bytes)")


def libertem_notes(statuses: Mapping[tuple[str, str], _records.ServiceStatus], scan: int) -> list[str]:
    """What the LiberTEM bridges (``status/libertem/<name>``, libertem_bridge/SPEC.md) say of ``scan``
    when it is the last scan one of them finished: how many positions LiberTEM got empty."""
    return [f"LiberTEM (bridge {name}): {bridge_last_scan(status.extra)}"
            for (service, name), status in sorted(statuses.items())
            if service == LIBERTEM_SERVICE and status.extra.get("last_scan") == scan]


def bridge_last_scan(extra: Mapping[str, Any]) -> str:
    """What a bridge's status (its ``extra`` fields) says of the last scan it finished."""
    if extra.get("last_scan_served"):
        return (f"{extra.get('last_scan_empty', 0)} of {extra.get('last_scan_positions', 0)} positions sent empty "
                "(never came in time)")
    return "not served (no client at its start, or the client went or was too slow)"


def _run_name(run: int) -> str:
    return f"run {run:08x}" if run else "run 0 (a sender that names no run)"


def _runs_notes(uid: str, part: _records.NodeGroupScanRecord,
                relays: Mapping[int, _records.RelayScanRecord]) -> list[str]:
    """One note per port of a NodeGroup that heard more than one run of the scan: each run's count,
    and which one the relay thread recorded (the others are a stray's or a restarted relay's)."""
    by_port: dict[int, list[_records.PortRun]] = {}
    for run in part.runs:
        by_port.setdefault(run.port, []).append(run)
    notes = []
    for port, runs in sorted(by_port.items()):
        if len(runs) < 2:
            continue
        relay = relays.get(port)
        relayed = relay.run if relay is not None else 0
        described = []
        for run in runs:
            count = ", no count came" if run.expected < 0 else f" of {run.expected}"
            whose = " (the relay's)" if run.run == relayed and relayed else ""
            described.append(f"{_run_name(run.run)}{whose}: {run.received} received{count}")
        notes.append(f"NodeGroup {uid}, port {port}: {len(runs)} runs of this scan, each counted apart: "
                     + "; ".join(described))
    return notes


def account(records: ScanRecords, nodegroups_gone: bool = False,
            producers_gone: Set[tuple[int, int]] = frozenset(), full: str = "") -> ScanAccount:
    """The account of a scan from its records.

    Args:
        records: the scan's records (``records_of``); without its request nothing can be counted.
        nodegroups_gone: none of the NodeGroups the scan was routed to is registered any more, so no
            file will come: a streamed scan whose producers are done and has no file record failed.
        producers_gone: (receiver, thread) of producer threads whose daemon is gone (no status in the
            kvstore): their part ends where their record stopped.
        full: ``kvstore_full(...)`` of the kvstore server's status: a pending account says it.
    """
    request = records.request
    if request is None:
        return ScanAccount(records.scan, PENDING, [], notes=[NO_REQUEST], kvstore_full=full)
    positions = request.scan_x * request.scan_y
    receivers = [ReceiverAccount(r, positions) for r in range(len(request.producer_threads))]
    native = request.source == SOURCE_NATIVE
    fallback = request.routing == [] and not native
    result = ScanAccount(records.scan, PENDING, receivers, planned_on_disk=fallback,
                         shape=(request.scan_x, request.scan_y))
    for (receiver, _thread), part in sorted(records.producers.items()):
        if receiver < len(receivers):
            if fallback:
                receivers[receiver].on_disk += part.spilled
            else:
                receivers[receiver].spilled += part.spilled
            receivers[receiver].sent += part.sent
            if part.spill_file:
                result.spill_files.append(part.spill_file + (" (partial)" if part.partial else ""))
    file = records.file
    if file is not None:
        result.path, result.extra_paths = file.path, list(file.extra_paths)
        for receiver, counted in enumerate(file.sectors_counted[:len(receivers)]):
            receivers[receiver].counted = counted
        if file.reason:
            result.notes.append(f"file: {file.outcome}: {file.reason}")
    for uid, part in sorted(records.nodegroups.items()):
        if part.timed_out or part.late or part.duplicates:
            result.notes.append(f"NodeGroup {uid}: {'timed out, ' if part.timed_out else ''}{part.late} late, "
                                f"{part.duplicates} duplicate sectors dropped")
        result.notes.extend(_runs_notes(uid, part, records.relay_threads))
    result.died = [f"r{r}t{t}" for r, t in sorted(producers_gone)
                   if (part := records.producers.get((r, t))) is None or part.state not in FINAL_PRODUCER_STATES]
    producers_done = producers_final(records, producers_gone)
    if fallback:
        done = producers_done
    elif native and request.routing == []:
        done = True  # nobody could take it: the aggregator dropped what came
    else:
        # An abort that came before anything was sent leaves the NodeGroups nothing to write.
        nothing_sent = records.abort is not None and not any(part.sent for part in records.producers.values())
        done = producers_done and (file is not None or nodegroups_gone or nothing_sent)
    if records.abort is not None:
        result.notes.append(f"aborted by {records.abort.by} (sectorflow abort)")
    if not done:
        result.outcome = PENDING
        result.kvstore_full = full
        _settle_pending(records, request, receivers, producers_gone)
        return result
    _explain_missing(records, request, receivers, producers_gone)
    if records.abort is not None and (result.missing or (file is None and not fallback)):
        result.outcome = ABORTED
    elif file is None and not fallback:
        result.outcome = FAILED
        result.notes.append("no file: no NodeGroup was registered when the native stream began" if
                            native and request.routing == [] else
                            "no file: the NodeGroups the scan was routed to are gone")
    elif file is not None and file.outcome == _records.OUTCOME_FAILED and result.counted == 0:
        result.outcome = FAILED
    elif result.missing != 0:
        result.outcome = INCOMPLETE
    elif fallback:
        result.outcome = ON_DISK
    elif result.spilled != 0:
        result.outcome = SPILLED
    else:
        result.outcome = COMPLETE
    return result


def _settle_pending(records: ScanRecords, request: _records.ScanRequestRecord, receivers: list[ReceiverAccount],
                    producers_gone: Set[tuple[int, int]]) -> None:
    """While the scan runs, what is certainly lost already is missing, with where; the rest is pending.

    Certain: what never reached a producer, what a thread that ended (or died) did not send, and
    what the aggregator dropped for a dead NodeGroup. A sector sent and not yet counted is pending:
    the file that counts it comes at the end.
    """
    for account in receivers:
        parts = [(thread, part) for (receiver, thread), part in sorted(records.producers.items())
                 if receiver == account.receiver]
        account.explain(sum(part.lost_upstream for _, part in parts),
                        "not in the receiver's raw files" if request.source == SOURCE_REPLAY
                        else "never reached the producer")
        for thread, part in parts:
            if part.state in FINAL_PRODUCER_STATES:
                why = f": {part.error}" if part.error else ""
                account.explain(part.unaccounted, f"not sent by thread {thread}{why}")
            elif (account.receiver, thread) in producers_gone:
                account.explain(part.unaccounted, f"not sent by thread {thread}, which died mid-scan")
        relay = records.relays.get(account.receiver)
        if relay is not None:
            _explain_dropped(account, relay)
        account.pending = account.missing - account.explained


def _explain_dropped(account: ReceiverAccount, relay: _records.RelayScanRecord) -> None:
    """What the aggregator thread dropped, by NodeGroup. A relay thread declares a NodeGroup dead on
    every failed send but one: the send it was in when the aggregator stopped (aggregator/src/relay.cpp
    ``forward``); a scan closed there also drops its stragglers. Neither says the NodeGroup went."""
    for uid, lost in sorted(relay.lost.items()):
        why = ("declared dead" if uid in relay.dead else
               "not declared dead (as the aggregator stopped, or after the scan closed there)")
        account.explain(lost, f"dropped at the aggregator: NodeGroup {uid} {why}")


def _explain_missing(records: ScanRecords, request: _records.ScanRequestRecord, receivers: list[ReceiverAccount],
                     producers_gone: Set[tuple[int, int]]) -> None:
    """Follows each receiver's sectors along the chain and says where the missing ones stopped."""
    for account in receivers:
        _follow_chain(records, request, account, producers_gone)
        # A thread that died mid-scan sent nothing after its last record says so: what no later stage
        # accounts for died with it (unsent, or queued in its socket when it was killed).
        gone = [(thread, records.producers.get((receiver, thread))) for receiver, thread in sorted(producers_gone)
                if receiver == account.receiver]
        dead = [thread for thread, part in gone if part is not None and part.state not in FINAL_PRODUCER_STATES]
        if dead and account.missing > 0:
            account.explain(account.missing, f"not sent by thread {', '.join(map(str, dead))}, which died mid-scan")
        # A thread writes its record before its info and data (producer.cpp): one gone without a
        # record sent nothing of the scan.
        unrecorded = [thread for thread, part in gone if part is None]
        if unrecorded and account.missing > 0:
            account.explain(account.missing, f"not sent by thread {', '.join(map(str, unrecorded))}, which died "
                                             "before it wrote a record of the scan")


def _unrelayed(records: ScanRecords, request: _records.ScanRequestRecord, receiver: int,
               parts: list[_records.ProducerScanRecord], relay: _records.RelayScanRecord,
               unrelayed: int) -> list[tuple[int, str, bool]]:
    """Where a receiver's sectors sent but not relayed were, as (count, relay thread, its record
    complete): with a tier, each member's relay thread by what the producer threads sent to that
    member (``tier_sent``), so the account names the member that lost them; else (or when the
    per-member sums do not place them all) the receiver's relay thread."""
    if unrelayed <= 0:
        return []
    whole = [(unrelayed, f"aggregator thread {receiver}", relay.complete)]
    if len(request.tier) <= 1 or not parts or not all(part.tier_sent for part in parts):
        return whole
    places = []
    for member in request.tier:
        thread = relay_thread(member, receiver, len(request.producer_threads))
        record = records.relay_threads.get(thread)
        held = sum(record.forwarded.values()) + sum(record.lost.values()) if record is not None else 0
        count = sum(part.sent_to(member) for part in parts) - held
        if count > 0:
            places.append((count, f"relay thread t{thread} (tier member {member})",
                           record is not None and record.complete))
    return places if sum(count for count, _, _ in places) == unrelayed else whole


def _follow_chain(records: ScanRecords, request: _records.ScanRequestRecord, account: ReceiverAccount,
                  producers_gone: Set[tuple[int, int]]) -> None:
    """Places one receiver's missing sectors at the stage of the chain whose record shows them last."""
    if account.missing <= 0:
        if account.missing < 0:
            account.reasons.append(f"{-account.missing} more sectors accounted than the scan has")
        return
    relay = records.relays.get(account.receiver)
    if request.source == SOURCE_NATIVE and request.routing == []:
        account.explain(account.missing, "not streamed: no NodeGroup was registered when the native stream "
                                         "began (the aggregator dropped what came)")
        return
    if request.source == SOURCE_NATIVE:
        # The native receiver's threads say nothing beyond their headers: what did not reach the
        # aggregator thread is all the account can tell of them.
        arrived = sum(relay.forwarded.values()) + sum(relay.lost.values()) if relay else 0
        account.explain(account.sectors - arrived, "never reached the aggregator from the native receiver")
    # A thread with no record is gone (else the scan would be pending): _explain_missing places its sectors.
    parts = [part for (receiver, _), part in records.producers.items() if receiver == account.receiver]
    for receiver, thread in sorted(producers_gone):
        part = records.producers.get((receiver, thread))
        if receiver == account.receiver and part is not None and part.state not in FINAL_PRODUCER_STATES:
            account.reasons.append(f"producer thread {thread} died mid-scan: what it sent after its last "
                                   "record is not known")
    # A replay streams what the raw files hold: the rest was counted or lost in the first run.
    account.explain(sum(part.lost_upstream for part in parts),
                    "not in the receiver's raw files" if request.source == SOURCE_REPLAY
                    else "never reached the producer")
    for part in parts:
        if part.state in FINAL_PRODUCER_STATES and part.unaccounted:
            why = f": {part.error}" if part.error else ""
            account.explain(part.unaccounted, f"not sent by thread {part.thread}{why}")
    sent = sum(part.sent for part in parts)
    if request.source == SOURCE_NATIVE and relay is not None:
        sent = sum(relay.forwarded.values()) + sum(relay.lost.values())
    if relay is None:
        if sent > account.counted:
            account.explain(sent - account.counted, f"sent, not counted, no record from aggregator thread "
                                                    f"{account.receiver}")
        return
    forwarded = sum(relay.forwarded.values())
    _explain_dropped(account, relay)
    unrelayed = sent - forwarded - sum(relay.lost.values())
    for count, thread, complete in _unrelayed(records, request, account.receiver, parts, relay, unrelayed):
        # The record says what one relay process forwarded in one run of the scan number: a
        # complete one that relayed fewer than were sent is another run's (a stray native message,
        # a repeat), never a stop; only an unfinished one may be a process that stopped mid-scan.
        account.explain(count,
                        f"sent, but {thread}'s record is of another run of the scan number (a stray or repeated "
                        "stream), which completed with fewer"
                        if complete else
                        f"sent but not relayed (not in {thread}'s record: in flight when it stopped or restarted, "
                        "or the scan closed unfinished there)")
    received = 0
    for uid, count in sorted(relay.forwarded.items()):
        part = records.nodegroups.get(uid)
        if part is None:
            if count:
                account.explain(count, f"forwarded to NodeGroup {uid}, which wrote no record")
            continue
        # The NodeGroup's ports of this receiver: one per member of the aggregation tier.
        receivers = max(len(request.producer_threads), 1)
        got = sum(part.received[account.receiver::receivers])
        received += got
        if count > got:
            account.explain(count - got, f"forwarded to NodeGroup {uid} but not received")
    uncounted = received - account.counted
    if uncounted > 0:
        account.explain(uncounted, "received by NodeGroups but not in the file")
