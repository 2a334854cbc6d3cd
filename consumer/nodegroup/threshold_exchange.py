"""One set of thresholds per scan: rank 0 fits them once from every NodeGroup's sample.

Each NodeGroup samples the first frames it receives (``[counting] threshold_sample_frames``), so the
NodeGroups of one scan sample different frames, and thresholds fitted from each sample alone differ by
the samples' noise: pixel values are integers, so two thresholds on both sides of an integer ADU
count that value's dark pixels in some NodeGroups' frames only. With ``[counting] threshold_share_ms``
each NodeGroup instead closes its sample and hands it over (its histogram, a few hundred integers); the
rank loop sends it to rank 0, which merges the samples of a scan, fits once (the fit every NodeGroup
would run, on all their frames) and sends the thresholds back to every rank; each NodeGroup counts
with them. A NodeGroup given none within ``threshold_share_ms`` decides from its own sample, as
before (docs/contracts.md, "One scan, one set of thresholds").
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sectorflow.consumer.counting import STATISTICS_FIELDS, CountingError, SampleHistogram, ThresholdStatistics, statistics_dict

log = logging.getLogger(__name__)

#: Scans whose decision rank 0 keeps, to answer a NodeGroup whose sample comes after it decided.
KEPT_DECISIONS = 64


def statistics_from_dict(values: dict[str, Any]) -> ThresholdStatistics:
    """The statistics of :func:`statistics_dict` (they cross MPI as a dict)."""
    statistics = ThresholdStatistics()
    for name in STATISTICS_FIELDS:
        setattr(statistics, name, values[name])
    return statistics


@dataclass
class _Samples:
    first_at: float
    by_uid: dict[str, SampleHistogram] = field(default_factory=dict)


class ThresholdExchange:
    """Rank 0's side: collects a scan's samples and fits its thresholds once.

    :param job_uids: every NodeGroup of the job (all of them sampling is the usual case).
    :param background_sigma: ``[counting] background_sigma``.
    :param xray_sigma: ``[counting] xray_sigma``.
    :param share_s: ``[counting] threshold_share_ms`` in seconds: how long a NodeGroup waits. Rank 0
        fits with the samples it has half of that after the scan's first came, so that the
        thresholds reach the NodeGroups before they give up on them.
    :param clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, job_uids: list[str], background_sigma: float, xray_sigma: float, share_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.job_uids = set(job_uids)
        self.background_sigma = background_sigma
        self.xray_sigma = xray_sigma
        self.share_s = share_s
        self.clock = clock
        self.samples: dict[int, _Samples] = {}
        self.decisions: OrderedDict[int, dict[str, Any] | None] = OrderedDict()
        self._answer: set[int] = set()  # decided scans a late sample asks for again

    def add(self, scan: int, uid: str, sample: SampleHistogram) -> None:
        """A NodeGroup's closed sample of ``scan``."""
        if scan in self.decisions:
            self._answer.add(scan)
            return
        self.samples.setdefault(scan, _Samples(self.clock())).by_uid[uid] = sample

    def due(self) -> list[tuple[int, dict[str, Any]]]:
        """The scans whose thresholds go to the NodeGroups now, as (scan, statistics_dict): those
        every NodeGroup of the job sampled, those whose first sample came half the wait ago, and
        decided scans a late NodeGroup asked for. A scan whose samples cannot be fitted goes to
        nobody: its NodeGroups decide from their own samples (and report their errors)."""
        now = self.clock()
        out = []
        for scan, samples in list(self.samples.items()):
            if not self.job_uids <= samples.by_uid.keys() and now - samples.first_at < self.share_s / 2:
                continue
            del self.samples[scan]
            decision = self._fit(scan, samples.by_uid)
            self.decisions[scan] = decision
            while len(self.decisions) > KEPT_DECISIONS:
                self.decisions.popitem(last=False)
            if decision is not None:
                out.append((scan, decision))
        for scan in self._answer:
            decision = self.decisions.get(scan)
            if decision is not None:
                out.append((scan, decision))
        self._answer.clear()
        return out

    def _fit(self, scan: int, by_uid: dict[str, SampleHistogram]) -> dict[str, Any] | None:
        merged = SampleHistogram()
        try:
            for uid in sorted(by_uid):
                merged.merge(by_uid[uid])
            statistics = merged.statistics(background_threshold_n_sigma=self.background_sigma,
                                           x_ray_threshold_n_sigma=self.xray_sigma)
        except CountingError as error:
            log.warning("scan %d: no shared thresholds from the samples of %d NodeGroups (%s); each decides from "
                        "its own", scan, len(by_uid), error)
            return None
        missing = sorted(self.job_uids - by_uid.keys())
        log.info("scan %d: thresholds from %d frames of %d NodeGroups: background %.3f, x-ray %.1f ADU%s", scan,
                 merged.frames, len(by_uid), statistics.background_threshold, statistics.x_ray_threshold,
                 f" (none came from {', '.join(missing)})" if missing else "")
        return statistics_dict(statistics)


__all__ = ["KEPT_DECISIONS", "ThresholdExchange", "statistics_from_dict"]
