"""The C library's heap, set for a data path of large messages (every sectorflow service).

A sector message (166 KB for the 4D Camera) is above glibc's initial mmap threshold (128 KiB), so
each is mapped and faulted in page by page; once glibc has raised the threshold past it, a free
that leaves more than twice the threshold at the heap's top still hands the pages back, and the
next message faults them in again. Measured on the transport benchmark (BENCHMARKS.md,
2026-11-24): page faults and zeroing were about a sixth of the aggregator's CPU. Fixing both
thresholds keeps the buffers of the messages in flight on the heap, reused.
"""

from __future__ import annotations

import ctypes

# mallopt(3) parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Messages below this come from the heap (glibc's own ceiling for its moving threshold on 64-bit).
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
# Free memory kept at the heap's top before it is given back: about fifty 4D Camera sectors.
TRIM_THRESHOLD_BYTES = 8 * 1024 * 1024


def keep_messages_on_heap() -> bool:
    """Set the thresholds above; False where the C library has no mallopt (not glibc)."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


def environment() -> dict[str, str]:
    """The same thresholds as glibc's environment variables, for a program that does not call
    keep_messages_on_heap (the benchmarks' own C++ programs: a comparison is then like for like)."""
    return {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD_BYTES)}
