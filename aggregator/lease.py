"""Which aggregator is active: a lease in the kvstore (``status/aggregator/active``), for a stack with a standby.

With ``[aggregator] standby_host`` set, every aggregator process takes the lease before it binds its
ports and relays; the others wait as standbys (``status/aggregator/standby-<host>-<pid>``). With an
aggregation tier, each member has its own lease (``status/aggregator/active-<i>``, ``lease_key``):
member i takes lease i, and the one standby takes the first lease that falls free and relays that
member's slice, on that member's ports, on its own host. The
lease is a ServiceStatus record whose extra fields say who holds it (``holder``: ``host:pid:nonce``,
``host``, ``pid``), since when (``since_s``), how many takeovers the stack has seen (``takeovers``)
and whom the holder took over from (``took_over_from``), and once the holder routed its first
sector, when (``first_routed_s``: the failover benchmark's end mark).

Why it is safe (kvstore/SPEC.md, "Wire"): a takeover is a ``create=1`` write, which the server takes
only while the key is absent and handles one at a time, so of two standbys (or a standby and a
returning old active) exactly one gets it, and every process learns which from its replica. The
holder renews the record every eighth of ``takeover_s``; the server expires it ``takeover_s`` after
the last renewal it received. The holder fences itself: it stops relaying once it has not seen one
of its renewals come back for three quarters of ``takeover_s``, before the server can have expired
the lease for anyone else to take (a holder cut off from the kvstore, a hung process), and the last
quarter is its time to free the ports. A holder that finds the record naming another process stops
at once. A restarted old aggregator finds the lease held and waits as a standby.

With a kvstore pair, a failover must not fence the holder (docs/fault-model.md, "The lease and the
kvstore pair"): the loader refuses a ``takeover_s`` shorter than the time a client needs to find the
new active (``configs.schema.min_takeover_s``); the new active counts every ttl afresh from its
takeover (a holder is silent only after a whole ttl in which it could reach it), and the renewals
the holder sent meanwhile reached it as held writes. A holder that fenced itself and takes the free
lease again is no takeover: nobody else held it.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

from sectorflow._core import protocol as _records
from sectorflow.configs.schema import LEASE_FENCE_FRACTION, LEASE_RENEWALS_PER_PERIOD
from sectorflow.kvstore import Client
from sectorflow.protocol import SERVICE_AGGREGATOR, STATE_IDLE, STATE_STREAMING, ServiceStatus, status_key
from sectorflow.waiting import WaitTimeout, wait_until

LEASE_NAME = "active"
LEASE_KEY = status_key(SERVICE_AGGREGATOR, LEASE_NAME)
STANDBY_PREFIX = "standby-"


def lease_key(members: int, member: int) -> str:
    """The lease of tier member ``member`` of ``members``: LEASE_KEY for a tier of one."""
    return LEASE_KEY if members == 1 else f"{LEASE_KEY}-{member}"


def lease_member(name: str) -> int | None:
    """The member whose lease ``status/aggregator/<name>`` is (0 for the lease of a tier of one);
    None if it is no lease."""
    if name == LEASE_NAME:
        return 0
    head, _, index = name.partition("-")
    return int(index) if head == LEASE_NAME and index.isdigit() else None


def standby_name() -> str:
    """This process's standby status name (no ``/``: a key part)."""
    return f"{STANDBY_PREFIX}{socket.gethostname()}-{os.getpid()}"[:200].replace("/", "_")


def decode_lease(raw: bytes | None) -> ServiceStatus | None:
    """The lease record, or None if absent or not decodable (a record nobody holds)."""
    if raw is None:
        return None
    try:
        return ServiceStatus.decode(raw)
    except _records.ProtocolError:
        return None


def describe(entries: dict[str, bytes]) -> str:
    """One line for ``sectorflow status``: the active aggregator (each member's, with a tier),
    takeovers, standbys ("" without a lease)."""
    prefix = LEASE_KEY + "-"
    leases = {member: decode_lease(raw) for key, raw in entries.items()
              if key.startswith(prefix) and (member := lease_member(key.rsplit("/", 1)[1])) is not None}
    standbys = sorted(key.rsplit("/", 1)[1][len(STANDBY_PREFIX):] for key in entries
                      if key.startswith(status_key(SERVICE_AGGREGATOR, STANDBY_PREFIX)))
    waiting = f"; standby: {', '.join(standbys)}" if standbys else "; no standby"
    if leases:  # a tier: one part per member whose lease the kvstore holds
        return "aggregators: " + "; ".join(f"member {member} {_holder(lease)}"
                                           for member, lease in sorted(leases.items())) + waiting
    lease = decode_lease(entries.get(LEASE_KEY))
    if lease is None and not standbys:
        return ""
    if lease is None:
        return f"aggregator: none active (the lease is free: a standby takes it){waiting}"
    return f"aggregator: {_holder(lease)}{waiting}"


def _holder(lease: ServiceStatus | None) -> str:
    if lease is None:
        return "none active (its lease does not decode)"
    extra = lease.extra
    text = (f"active {extra.get('host')} pid {extra.get('pid')} since {_clock(extra.get('since_s'))}, "
            f"takeovers {extra.get('takeovers', 0)}")
    if extra.get("took_over_from"):
        text += f" (took over from {extra['took_over_from']})"
    return text


def _clock(seconds: object) -> str:
    return time.strftime("%H:%M:%S", time.localtime(seconds)) if isinstance(seconds, (int, float)) else "?"


class Lease:
    """This process's side of the lease; every method is called from the daemon's main thread."""

    def __init__(self, client: Client, period_s: float, key: str = LEASE_KEY) -> None:
        self._client = client
        self.period_s = period_s
        self.key = key
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._takeovers_seen = -1  # the highest count of any lease record seen; -1: none seen
        self._last_holder = ""      # "host pid N" of the last other holder seen
        self._held_last = False     # the last record seen was this process's own
        self._extra: dict[str, int | float | str] | None = None  # what this process wrote last, while it holds the lease
        self._lost = ""  # why this process stopped holding the lease last
        self._renewal = 0
        self._sent_at = 0.0
        self._confirmed_at = 0.0
        # When each renewal still unconfirmed was sent: the one that comes back dates the confirmation
        # (a round trip longer than the renewal period still confirms the older renewals).
        self._sent: dict[int, float] = {}

    def current(self) -> ServiceStatus | None:
        """The lease as the replica holds it; remembers the takeover count and holder it shows."""
        record = decode_lease(self._client.get(self.key))
        if record is not None:
            count = record.extra.get("takeovers", 0)
            if isinstance(count, int):
                self._takeovers_seen = max(self._takeovers_seen, count)
            holder = record.extra.get("holder")
            self._held_last = holder == self.holder
            if isinstance(holder, str) and holder != self.holder:
                self._last_holder = f"{record.extra.get('host')} pid {record.extra.get('pid')}"
        return record

    def mine(self, record: ServiceStatus | None) -> bool:
        return record is not None and record.extra.get("holder") == self.holder

    def free(self) -> bool:
        """Whether nobody holds the lease (as this replica, live, sees it)."""
        return self._client.synced() and self.current() is None

    def take(self) -> bool:
        """Asks the server for the lease (create=1) and waits up to one period for the answer; True if won.

        Taking it back after this process's own record expired (it fenced itself, the kvstore lost it)
        is no takeover: the count stays and nobody is named as taken over from.
        """
        again = self._held_last
        takeovers = max(self._takeovers_seen, 0) if again or self._takeovers_seen < 0 else self._takeovers_seen + 1
        extra: dict[str, int | float | str] = {
            "holder": self.holder, "host": socket.gethostname(), "pid": os.getpid(), "since_s": time.time(),
            "takeovers": takeovers, "renewal": 0}
        if self._last_holder and not again:
            extra["took_over_from"] = self._last_holder
        self._extra, self._renewal, self._lost = extra, 0, ""
        self._sent_at = self._confirmed_at = time.monotonic()
        self._sent = {0: self._sent_at}
        self._client.create_once(self.key, self._encode(False), self.period_s)
        try:
            record = wait_until(self.current, self.period_s, f"the kvstore's answer to {self.key}", 0.01)
        except WaitTimeout:
            record = None
        if self.mine(record):
            self._confirmed_at = time.monotonic()
            return True
        self._extra = None
        return False

    def _encode(self, streaming: bool) -> bytes:
        assert self._extra is not None
        record = ServiceStatus(state=STATE_STREAMING if streaming else STATE_IDLE, scan=0, messages=0, bytes=0,
                               extra=self._extra)
        record.updated_s = time.time()
        return record.encode()

    def keep(self, streaming: bool = False, **fields: int | float | str) -> str:
        """Renews the lease when due; returns "" while this process may relay, else why it must stop.

        ``fields`` go into the record (e.g. ``first_routed_s``) with the next renewal.
        """
        if self._extra is None:
            return self._lost or "this process does not hold the lease"
        why = self._renew(streaming, fields)
        if why:
            self._extra, self._lost = None, why  # never renewed again: it could overwrite a new holder's lease
        return why

    def _renew(self, streaming: bool, fields: dict[str, int | float | str]) -> str:
        assert self._extra is not None
        now = time.monotonic()
        record = self.current()
        if record is not None and not self.mine(record):
            return (f"the lease is held by {record.extra.get('host')} pid {record.extra.get('pid')} (it took over): "
                    "stopping relaying")
        renewal = record.extra.get("renewal") if self.mine(record) else None
        if isinstance(renewal, int) and renewal in self._sent:
            self._confirmed_at = max(self._confirmed_at, self._sent[renewal])
            self._sent = {n: at for n, at in self._sent.items() if n > renewal}
        if now - self._confirmed_at > self.period_s * LEASE_FENCE_FRACTION:
            return (f"no renewal of the lease came back from the kvstore for {now - self._confirmed_at:.1f} s "
                    f"(takeover_s {self.period_s:g}): a standby may take over, stopping relaying")
        changed = any(self._extra.get(k) != v for k, v in fields.items())
        if changed or now - self._sent_at >= self.period_s / LEASE_RENEWALS_PER_PERIOD:
            self._renewal += 1
            self._extra.update(fields)
            self._extra["renewal"] = self._renewal
            if record is None:
                # The key is gone though this holder renewed in time (a kvstore restarted without its
                # log): claim it again as any standby would, never overwrite a new holder's.
                self._client.create_once(self.key, self._encode(streaming), self.period_s)
            else:
                self._client.set_once(self.key, self._encode(streaming), self.period_s)
            self._sent_at = self._sent[self._renewal] = now
        return ""

    def release(self) -> None:
        """Gives the lease up (a clean stop): a standby takes over at once rather than after takeover_s."""
        if self._extra is not None and self.mine(self.current()):
            self._client.erase(self.key)
        self._extra = None
