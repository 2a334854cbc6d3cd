"""One stack, one owner per role and name: a daemon refuses to start while a live one of its role and name runs.

Every service's status says who runs it (kvstore/SPEC.md, ``status/<service>/<name>``): the extra
fields ``host`` (``gethostname()``) and ``pid``, and for NodeGroups ``job`` (the job's name,
``sectorflow nodegroup --job``) and ``machine`` (this machine's id). Once its kvstore replica is
synced, and before it serves, a producer daemon looks for a live status of its receiver, the
aggregator for any relay thread's, a NodeGroup job's rank 0 for a NodeGroup of its job's name, all
of another process: found, it stops with one line naming that process's host and pid, rather than
join a stack another process already serves (as once a second ``up`` did, whose producers and
NodeGroups joined the running stack and split its scans).

Live means: a status within its ttl whose state is not stopping or stopped. A killed process's
status outlives it by its ttl, so one of this host whose pid no longer exists is taken as dead: a
daemon restarted at once after a kill starts. One of another host counts until its ttl has run out.
This is a check, not a lock: two daemons started in the same moment, before either published its
status, both start (docs/fault-model.md, "Known gaps").

A live status that names another stack (its ``stack_id``, set by its writer's kvstore client:
kvstore/SPEC.md, "The stack's identity") than the one this daemon's client synced with still
refuses: its process writes to this kvstore, so it serves this stack's scans whatever it says. The
refusal names both ids: that process joined another stack (the kvstore restarted without its log, or
another stack's kvstore took these ports) and has not synced with this one, so what an operator
stops is a leftover of the other stack, not a rival of this one.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sectorflow.errors import SectorflowError
from sectorflow.kvstore import STACK_ID_FIELD
from sectorflow.protocol import STATE_STOPPED, STATE_STOPPING, ServiceStatus

# Where a machine's id is kept (systemd, dbus); the boot id when neither exists (a container).
_MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id", "/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class Owner:
    """The process behind a status."""

    host: str
    pid: int

    def __str__(self) -> str:
        return f"host {self.host}, pid {self.pid}"


def me() -> Owner:
    return Owner(socket.gethostname(), os.getpid())


def owner_fields() -> dict[str, str | int]:
    """The extra fields that name this process in a status."""
    owner = me()
    return {"host": owner.host, "pid": owner.pid}


def machine_id() -> str:
    """An id of this machine that two machines with one host name do not share ("" if none is readable)."""
    for path in _MACHINE_ID_FILES:
        try:
            text = Path(path).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            return text
    return ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    # A killed process its parent has not reaped yet (a supervisor between two polls) is a zombie:
    # signals reach it, but it serves nothing.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def live_owner(statuses: Mapping[tuple[str, str], ServiceStatus], mine: Callable[[str, ServiceStatus], bool],
               own: Callable[[Owner], bool]) -> tuple[str, Owner, ServiceStatus] | None:
    """The first live status of the role and name (``mine(name, status)``) that another process
    (``not own(owner)``) publishes, with that process and the status; None if there is none."""
    here = socket.gethostname()
    for (_, name), status in sorted(statuses.items()):
        if status.state in (STATE_STOPPING, STATE_STOPPED) or not mine(name, status):
            continue
        host, pid = status.extra.get("host"), status.extra.get("pid")
        if not isinstance(host, str) or not isinstance(pid, int) or isinstance(pid, bool):
            continue  # published by a process that does not say who it is: a receiver embedding the library
        owner = Owner(host, pid)
        if own(owner) or (host == here and not _pid_alive(pid)):
            continue
        return name, owner, status
    return None


def refuse_if_running(statuses: Mapping[tuple[str, str], ServiceStatus], mine: Callable[[str, ServiceStatus], bool],
                      what: str, own: Callable[[Owner], bool] | None = None, stack: str = "") -> None:
    """Raise SectorflowError naming the process if a live ``what`` of another process publishes a status.

    ``own``: which processes are this one (default: this process alone; a NodeGroup job has several).
    ``stack``: the stack id this process's client synced with; the refusal names the other one's if it differs.
    """
    found = live_owner(statuses, mine, own or (lambda owner: owner == me()))
    if found is None:
        return
    name, owner, status = found
    theirs = status.extra.get(STACK_ID_FIELD)
    where = (f"; it runs in stack {theirs}, not this one's {stack}: a leftover of another stack that has not synced "
             "with this kvstore" if stack and isinstance(theirs, str) and theirs != stack else "")
    raise SectorflowError(f"{what} is running already ({owner}; its status {name!r} is live{where}): one stack has "
                          f"one; stop that one first (on {owner.host}: kill {owner.pid}), or use another configuration")
