"""The live state of a kvstore replica as text tables: services, NodeGroups, the acquire request, recent scans.

Every service that receives messages from peers counts what it refused by kind; the REFUSED column
shows the total and the kinds, so an operator sees at a glance which service is being sent what.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sectorflow._core import kvstore as _core
from sectorflow._core import protocol as _records
from sectorflow.operations.scan_account import (
    LIBERTEM_SERVICE,
    ScanAccount,
    abandoned_producers,
    account,
    kvstore_full,
    libertem_notes,
    records_of,
    scans_in,
)

from sectorflow.aggregator.lease import describe as describe_aggregators
from sectorflow.kvstore.status_records import describe_pair, status_entries

SERVICE_HEADERS = ("SERVICE", "NAME", "STATE", "SCAN", "MESSAGES", "BYTES", "AGE", "REFUSED")
# The extra fields in which a service counts the messages it refused: "malformed" and
# "malformed_<kind>" (sectorflow.protocol.refusals); shown in the REFUSED column, not in the details.
REFUSED_FIELD = "malformed"
NODEGROUP_HEADERS = ("UID", "HOST", "PORTS", "NODE", "RANK", "STATUS")
# The sectors' fates in sectorflow.operations.scan_account's words: acquire --wait and the dashboard use the same.
SCAN_HEADERS = ("SCAN", "SHAPE", "OUTCOME", "COUNTED", "SPILLED", "ON DISK", "PENDING", "MISSING", "FILE")
RECENT_SCANS = 10
# The services' further fields are listed under the table, one service a paragraph of this width:
# as a column they made every row as wide as the longest service's fields.
DETAILS_WIDTH = 100
INVALID = "invalid"
QUIET_FIELDS = frozenset({"machine", _core.STACK_ID_FIELD, _core.STACK_CHANGED_FIELD})


def render(entries: Mapping[str, bytes], now_s: float, title: str, config: str = "",
           producers: Mapping[str, int] | None = None, tier: str = "") -> str:
    """Tables of every status, NodeGroup and acquire request in ``entries`` (key -> value bytes).

    A value that does not decode is shown as ``invalid`` with the reason, never skipped, and a last
    line counts and names them (someone wrote them: the operator should know who).

    Args:
        entries: a replica's content, e.g. ``client.subtree()``.
        now_s: the current Unix time, for the age of each status.
        title: the first line (which server, which sequence).
        config: the configuration file, for the replay command of a scan on disk
            (``scan_account.config_argument``); "" leaves --config out of it.
        producers: the producer threads the configuration has (``r<R>t<T>`` -> its receiver R): one
            with no status is named, as its receiver streams nothing (a daemon that died leaves no row).
        tier: the aggregation tier's line (``sectorflow.aggregator.tier.describe``), "" for none.
    """
    pair = describe_pair(entries)
    lines = [title, *([pair] if pair else []), ""]
    services = _service_rows(entries, now_s)
    lines.append(_table(SERVICE_HEADERS, [row[:-1] for row in services]) if services
                 else "no service has published a status")
    present = {name for _, service, name, status, _ in status_entries(entries, _records.SERVICE_PRODUCER)}
    lines.extend(f"producer {name}: NO STATUS: its daemon is not running, and receiver {receiver} streams nothing "
                 f"('sectorflow up --only producer-{receiver}' starts it again in a stack of 'sectorflow up')"
                 for name, receiver in (producers or {}).items() if name not in present)
    details = [(f"{row[0]} {row[1]}".strip(), row[-1]) for row in services if row[-1]]
    if details:
        lines.append("")
        for who, fields in details:
            lines.extend(_paragraph(f"{who}: ", fields.split(", ")))
    active = describe_aggregators(entries)
    if active or tier:
        lines.append("")
        lines.extend(line for line in (active, tier) if line)
    stack = _stack_lines(entries)
    if stack:
        lines.append("")
        lines.extend(stack)
    lines.extend(_refusal_lines(entries))
    lines.append("")
    nodegroups = _nodegroup_rows(entries)
    lines.append(_table(NODEGROUP_HEADERS, nodegroups) if nodegroups else "no NodeGroup is registered")
    request = entries.get(_records.ACQUIRE_REQUEST_KEY)
    if request is not None:
        lines.append("")
        lines.append(f"{_records.ACQUIRE_REQUEST_KEY}: {_describe_request(request)}")
    accounts = _scan_accounts(entries, {row[0] for row in nodegroups}, now_s)
    if accounts:
        lines.append("")
        lines.append(_table(SCAN_HEADERS, [row for row, _ in accounts]))
        lines.extend(result.died_line() for _, result in accounts if result.died)
        lines.extend(f"scan {result.scan}: {result.outcome}; count it with: {result.replay_command(config)}"
                     for _, result in accounts if result.replayable)
        bridges = {(entry.service, entry.name): entry.status for entry in status_entries(entries, LIBERTEM_SERVICE)
                   if entry.status is not None}
        lines.extend(f"scan {result.scan}: {note}" for _, result in accounts
                     for note in libertem_notes(bridges, result.scan))
    invalid = ([row[0] for row in services if row[2] == INVALID]
               + [row[0] for row in nodegroups if row[5].startswith(f"{INVALID}: ")])
    if request is not None and _describe_request(request).startswith(f"{INVALID}:"):
        invalid.append(_records.ACQUIRE_REQUEST_KEY)
    if invalid:
        lines.append("")
        lines.append(f"{len(invalid)} {'entry does' if len(invalid) == 1 else 'entries do'} not decode "
                     f"(shown as {INVALID} above): {', '.join(sorted(invalid))}")
    return "\n".join(lines)


def _service_rows(entries: Mapping[str, bytes], now_s: float) -> list[tuple[str, ...]]:
    rows = []
    for key, service, name, status, error in status_entries(entries):
        if status is None:
            rows.append((key, "", INVALID, "", "", "", "", "-", error))  # the reason under the table
            continue
        # A NodeGroup's machine id only tells two machines of one host name apart (sectorflow.ownership);
        # the stack is the title's, and a service of another one has a line of its own (_stack_lines).
        extra = ", ".join(f"{k} {v}" for k, v in sorted(status.extra.items())
                          if not _is_refusal_field(k) and k not in QUIET_FIELDS)
        age = f"{max(0.0, now_s - status.updated_s):.1f}s"
        rows.append((service, name, status.state, str(status.scan), f"{status.messages:,}",
                     _human_bytes(status.bytes), age, _refused(status.extra), extra))
    return rows


def _paragraph(lead: str, items: list[str]) -> list[str]:
    """``items`` after ``lead``, comma-separated, in lines of at most DETAILS_WIDTH (an item longer
    than that has a line of its own): a field and its value never split across lines."""
    lines, line = [], lead
    for index, item in enumerate(items):
        text = item + ("," if index < len(items) - 1 else "")
        if line != lead and len(line) + 1 + len(text) > DETAILS_WIDTH:
            lines.append(line)
            line = "    " + text
        else:
            line = f"{line}{'' if line == lead else ' '}{text}"
    lines.append(line)
    return lines


def _is_refusal_field(key: str) -> bool:
    return key == REFUSED_FIELD or key.startswith(f"{REFUSED_FIELD}_")


def _refused(extra: Mapping[str, object]) -> str:
    """"-", or the total and its kinds: "5 (header 2, no_info 3)"."""
    total = extra.get(REFUSED_FIELD, 0)
    if not total:
        return "-"
    prefix = f"{REFUSED_FIELD}_"
    kinds = [f"{key[len(prefix):]} {value}" for key, value in sorted(extra.items())
             if key.startswith(prefix) and value]
    return f"{total} ({', '.join(kinds)})" if kinds else str(total)


def kvstore_stack_id(entries: Mapping[str, bytes]) -> str:
    """The stack id the kvstore server's own status names ("" if none does)."""
    raw = entries.get(_records.status_key(_records.SERVICE_KVSTORE, "server"))
    try:
        stack = _records.ServiceStatus.decode(raw).extra.get(_core.STACK_ID_FIELD) if raw is not None else None
    except _records.ProtocolError:
        return ""  # shown as invalid in the table already
    return stack if isinstance(stack, str) and _core.is_stack_id(stack) else ""


def _stack_lines(entries: Mapping[str, bytes]) -> list[str]:
    """One line per service whose status names another stack than the kvstore's, or says that the
    stack it joined is gone, and per NodeGroup registration of another stack (kvstore/SPEC.md, "The
    stack's identity")."""
    server = kvstore_stack_id(entries)
    lines = []
    for key, raw in sorted(entries.items()):
        if not server or not key.startswith(_records.NODEGROUPS_PREFIX):
            continue
        try:
            registered = _records.NodeGroupRecord.decode(raw).stack_id
        except _records.ProtocolError:
            continue  # shown as invalid in the NodeGroup table already
        if registered and registered != server:
            lines.append(f"{key}: OTHER STACK: registered in stack {registered}, not the kvstore's {server}: its "
                         "NodeGroup had not synced with this kvstore when it wrote it, and writes it again once it has")
    for _, service, name, status, _ in status_entries(entries):
        if status is None or service == _records.SERVICE_KVSTORE:
            continue
        ours, joined = status.extra.get(_core.STACK_ID_FIELD), status.extra.get(_core.STACK_CHANGED_FIELD)
        if server and isinstance(ours, str) and ours != server:
            lines.append(f"{service} {name}: OTHER STACK: stack {ours}, not the kvstore's {server}: a service of "
                         "another stack writes here, or it has not synced since the kvstore restarted")
        elif isinstance(joined, str):
            lines.append(f"{service} {name}: STACK CHANGED: joined stack {joined}, now in stack {ours}: the kvstore "
                         "restarted without its log (a new, empty stack: the scans of the old one are gone) or "
                         "another stack's kvstore took its ports; it re-registered")
    return lines


def _refusal_lines(entries: Mapping[str, bytes]) -> list[str]:
    """What each kvstore server refused, by kind (the counters of its status): one line per server."""
    lines = []
    for key, _, _, status, _ in status_entries(entries, _records.SERVICE_KVSTORE):
        if status is None:
            continue  # shown as invalid in the table already
        counts = [f"{kind} {status.extra[kind]}" for kind in _core.REFUSAL_KINDS if kind in status.extra]
        if counts:
            lines.append(f"{key.removeprefix(_records.STATUS_PREFIX)} refused: {', '.join(counts)}")
    return lines


def _nodegroup_rows(entries: Mapping[str, bytes]) -> list[tuple[str, ...]]:
    rows = []
    for key, raw in sorted(entries.items()):
        if not key.startswith(_records.NODEGROUPS_PREFIX):
            continue
        try:
            record = _records.NodeGroupRecord.decode(raw)
            if _records.nodegroup_key(record.uid) != key:
                raise _records.ProtocolError(f"holds the record of uid {record.uid!r}")
        except _records.ProtocolError as error:
            rows.append((key, "", "", "", "", f"{INVALID}: {error}"))
            continue
        ports = ",".join(str(port) for port in record.ports)
        rows.append((record.uid, record.host, ports, record.node, str(record.rank), record.status))
    return rows


def _scan_accounts(entries: Mapping[str, bytes], registered: set[str],
                   now_s: float) -> list[tuple[tuple[str, ...], ScanAccount]]:
    """The last RECENT_SCANS scans with records: where their sectors ended (sectorflow.operations.scan_account).

    A producer thread that no daemon works on ends its part where its record stopped, as ``acquire``
    ends it: a scan whose producer died is over once its file is written, not pending for ever."""
    producers = {entry.name: entry.status for entry in status_entries(entries, _records.SERVICE_PRODUCER)
                 if entry.status is not None}
    rows = []
    for scan in scans_in(entries)[-RECENT_SCANS:]:
        records = records_of(entries, scan)
        routing = set(records.request.routing) if records.request is not None else set()
        result = account(records, nodegroups_gone=bool(routing) and not routing & registered,
                         producers_gone=abandoned_producers(records, producers, now_s),
                         full=kvstore_full(entries.get(_records.status_key("kvstore", "server"))))
        shape = f"{records.request.scan_x} x {records.request.scan_y}" if records.request is not None else "?"
        outcome = "kvstore full" if result.kvstore_full else result.outcome
        if records.rejected:
            outcome += f" ({len(records.rejected)} records invalid)"
        row = (str(scan), shape, outcome, f"{result.counted:,}", f"{result.spilled:,}", f"{result.on_disk:,}",
               f"{result.pending:,}", f"{result.missing:,}", result.path or "-")
        rows.append((row, result))
    return rows


def _describe_request(raw: bytes) -> str:
    try:
        request = _records.AcquireRequest.decode(raw)
    except _records.ProtocolError as error:
        return f"{INVALID}: {error}"
    rate = "as fast as possible" if request.rate_hz == 0 else f"{request.rate_hz:g} Hz"
    # The routing decides streaming or fallback for the whole scan: the one thing an operator asks.
    routing = (f"streamed to {', '.join(request.routing)}" if request.routing
               else "no NodeGroup: raw files to disk" if request.routing is not None else "each producer thread routes by its own replica")
    return (f"scan {request.scan_number}, {request.scan_x} x {request.scan_y} positions, {rate}, "
            f"source {request.source}, {routing}")


def _human_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{count} B"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in [headers, *rows]]
    return "\n".join(lines)
