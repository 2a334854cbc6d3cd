"""What /proc says about a process: peak resident memory (VmHWM), CPU time, children.

The parsers take the text of a /proc file, so that they are tested on fixed strings; the readers
around them return None for a process that has gone.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Clock ticks per second of the utime and stime fields of /proc/<pid>/stat.
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def status_kib(text: str, field: str) -> int | None:
    """The value in KiB of ``field`` (e.g. ``VmHWM``) in the text of /proc/<pid>/status; None if absent."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == field:
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                return int(parts[0])
            raise ValueError(f"/proc status line {line!r}: expected '{field}: <number> kB'")
    return None


def stat_fields(text: str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name, which may hold spaces and parentheses.

    Index 0 is the state (field 3 of proc(5)); the parent pid is index 1, utime 11, stime 12.
    """
    return text.rsplit(")", 1)[1].split()


def stat_cpu_ticks(text: str) -> int:
    """User plus system clock ticks of every thread of the process, from /proc/<pid>/stat."""
    fields = stat_fields(text)
    return int(fields[11]) + int(fields[12])


def stat_name(text: str) -> str:
    """The command name of /proc/<pid>/stat (a thread's name, in /proc/<pid>/task/<tid>/stat)."""
    return text[text.index("(") + 1:text.rindex(")")]


def by_thread_name(stats: list[str]) -> dict[str, float]:
    """CPU seconds by thread name, from the /proc stat texts of a process's threads; threads of
    one name (libzmq's I/O threads of two contexts, say) are added together."""
    seconds: dict[str, float] = {}
    for text in stats:
        name = stat_name(text)
        seconds[name] = seconds.get(name, 0.0) + stat_cpu_ticks(text) / TICKS_PER_S
    return seconds


def stat_parent(text: str) -> int:
    """The parent pid, from /proc/<pid>/stat."""
    return int(stat_fields(text)[1])


def descendants(parents: dict[int, int], root: int) -> list[int]:
    """Every pid below ``root`` in the tree ``parents`` (pid -> parent pid), breadth first."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    frontier = [root]
    while frontier:
        below = sorted(pid for parent in frontier for pid in children.get(parent, []))
        found += below
        frontier = below
    return found


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:  # the process has gone (or never was)
        return None


def peak_rss_kib(pid: int) -> int | None:
    """The peak resident set size (VmHWM) of a live process in KiB; None if it has gone."""
    text = _read(f"/proc/{pid}/status")
    return None if text is None else status_kib(text, "VmHWM")


def rss_kib(pid: int) -> int | None:
    """The resident set size now (VmRSS) of a live process in KiB; None if it has gone."""
    text = _read(f"/proc/{pid}/status")
    return None if text is None else status_kib(text, "VmRSS")


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) a live process has used; None if it has gone."""
    text = _read(f"/proc/{pid}/stat")
    return None if text is None else stat_cpu_ticks(text) / TICKS_PER_S


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds by thread name of a live process's threads now ({} if it has gone). The threads
    this project starts are named (sf-relay-0, sf-receive-0, ...), libzmq's too (ZMQbg/IO/0)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    return by_thread_name([text for tid in tids if (text := _read(f"/proc/{pid}/task/{tid}/stat")) is not None])


def process_tree(root: int) -> list[int]:
    """The live descendants of ``root`` (e.g. the MPI ranks below mpiexec)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            text = _read(f"/proc/{entry}/stat")
            if text is not None:
                parents[int(entry)] = stat_parent(text)
    return descendants(parents, root)


def command_line(pid: int) -> list[str]:
    """The argv of a live process ([] if it has gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]
