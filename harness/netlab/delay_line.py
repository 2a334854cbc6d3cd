"""The delay line program (delay_line.cpp) as a Python handle: start it, take the link down and up,
stop it and read its counters.

The program lives in the build tree: ``make build`` builds it in ``build/`` (tests on), the
benchmarks' on-demand build in ``build/bench-cpp/``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sectorflow.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = (REPO / "build" / "harness" / "netlab" / "delay_line",
              REPO / "build" / "bench-cpp" / "harness" / "netlab" / "delay_line")
READY_S = 10.0


class DelayLineError(RuntimeError):
    """The delay line is missing, did not start or did not report its counters."""


@dataclass(frozen=True)
class DirectionCounters:
    """Packets of one direction: ``read`` = forwarded + every kind of drop + unreleased_at_exit."""

    read: int
    forwarded: int
    forwarded_bytes: int
    dropped_loss: int
    dropped_down: int
    dropped_ring_full: int
    write_errors: int
    unreleased_at_exit: int


@dataclass(frozen=True)
class LinkCounters:
    """a_to_b: beamline side -> compute side; b_to_a: the way back."""

    a_to_b: DirectionCounters
    b_to_a: DirectionCounters


def program() -> Path:
    """The built delay_line executable; DelayLineError says how to build it when there is none."""
    for candidate in CANDIDATES:
        if candidate.exists():
            return candidate
    raise DelayLineError("no delay_line program in build/harness/netlab: run 'make build' "
                         "(or 'cmake --build build --target delay_line')")


class DelayLine:
    """A running delay line; ``stop`` drains it and returns its counters."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.append(line.strip())

    @classmethod
    def start(cls, prefix: Sequence[str], tun_a: str, tun_b: str, delay_ms: float, loss: float, seed: int,
              mtu: int, max_run_s: float) -> DelayLine:
        """Start it under ``prefix`` (e.g. ``ip netns exec NS``) and wait until both TUN devices exist."""
        argv = [*prefix, str(program()), "--tun-a", tun_a, "--tun-b", tun_b, "--delay-ms", str(delay_ms),
                "--loss", str(loss), "--seed", str(seed), "--mtu", str(max(mtu, 576)), "--max-run-s", str(max_run_s)]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = cls(process)

        def ready() -> bool:
            if process.poll() is not None:
                why = process.stderr.read().strip() if process.stderr else ""
                raise DelayLineError(f"delay_line exited ({process.returncode}) before it was ready: {why}")
            return any(text.startswith("ready") for text in line._lines)

        try:
            wait_until(ready, READY_S, "the delay line's TUN devices")
        except BaseException:
            line.stop()
            raise
        return line

    def down(self) -> None:
        self.process.send_signal(signal.SIGUSR1)

    def up(self) -> None:
        self.process.send_signal(signal.SIGUSR2)

    def stop(self, timeout_s: float = 15.0) -> LinkCounters | None:
        """SIGTERM (the program releases what is in flight, then prints its counters); SIGKILL after
        ``timeout_s``. Returns the counters, or None when the program was killed or had failed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout_s)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        for text in reversed(self._lines):
            if text.startswith("{"):
                try:
                    data = json.loads(text)
                    return LinkCounters(DirectionCounters(**data["a_to_b"]), DirectionCounters(**data["b_to_a"]))
                except (ValueError, KeyError, TypeError):
                    return None  # a line cut off by the kill: no counters, as documented
        return None
