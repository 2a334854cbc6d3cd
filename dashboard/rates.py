"""Rates from counters: the change of a service's counter between two of its statuses, per second.

Services publish cumulative counters with the time of the status (``updated_s``); a rate is the
difference of two successive statuses over the difference of their times, so it follows the
services' clocks, not the dashboard's polling. A counter that went down was reset (a producer's
counters start again with every scan): that interval gives no rate. A status older than
``stale_s`` means the service is not moving: its rate is 0.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Sample:
    time_s: float
    value: float
    rate: float = 0.0


class Rates:
    """Per-second rates of named counters, e.g. ``("aggregator/t0", "bytes")``."""

    def __init__(self, stale_s: float) -> None:
        self.stale_s = stale_s
        self._samples: dict[tuple[str, str], _Sample] = {}

    def observe(self, source: str, counter: str, time_s: float, value: float) -> None:
        """Records ``value`` of ``counter`` as ``source`` published it at ``time_s`` (its ``updated_s``)."""
        key = (source, counter)
        last = self._samples.get(key)
        if last is None:
            self._samples[key] = _Sample(time_s, value)
            return
        if time_s <= last.time_s:
            return  # the same status again
        rate = (value - last.value) / (time_s - last.time_s) if value >= last.value else 0.0
        self._samples[key] = _Sample(time_s, value, rate)

    def rate(self, source: str, counter: str, now_s: float) -> float:
        """The latest rate of ``counter`` of ``source`` (0 if unknown or stale)."""
        sample = self._samples.get((source, counter))
        if sample is None or now_s - sample.time_s > self.stale_s:
            return 0.0
        return sample.rate

    def forget_except(self, sources: set[str]) -> None:
        """Drops what is known of sources no longer present (a service that left)."""
        self._samples = {key: sample for key, sample in self._samples.items() if key[0] in sources}
