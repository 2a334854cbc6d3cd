"""The dashboard's cost per update: building the page's state and one /metrics scrape from a replica.

A replica of a beamline-sized stack is made here (records encoded by the real codecs): R receivers
of T producer threads, R relay threads, G NodeGroups, and S scans with every record (request, one
part per producer thread, per relay thread and per NodeGroup, the file). Timed: ``build_view`` (what
the dashboard does every ``[dashboard] update_ms``, off the event loop) and ``generate_latest`` of
the metrics registry (one Prometheus scrape), best of several repetitions. What a 500 ms update
period leaves for everything else is the fraction of a core the dashboard needs.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench import BenchmarkResult, RunOptions
from sectorflow.configs import Config

DESCRIPTION = "dashboard: ms per page update (build_view) and per /metrics scrape, by replica size"

# (receivers, threads per receiver, NodeGroups, scans with records): the local stack to a large beamline.
SIZES = [(4, 1, 2, 10), (4, 8, 16, 20), (4, 8, 64, 50), (8, 16, 128, 100)]
REPEATS = 5
MIN_REPEAT_S = 0.2


def replica(receivers: int, threads: int, groups: int, scans: int) -> dict[str, bytes]:
    """A kvstore map of a stack of that size after ``scans`` complete scans."""
    from sectorflow.protocol import (
        OUTCOME_COMPLETE, NodeGroupRecord, NodeGroupScanRecord, ProducerScanRecord, RelayScanRecord, ScanFileRecord,
        ScanRequestRecord, ServiceStatus, nodegroup_key, scan_file_key, scan_nodegroup_key, scan_producer_key,
        scan_relay_key, scan_request_key, status_key)

    uids = [f"ng-{g:03d}" for g in range(groups)]
    entries: dict[str, bytes] = {}
    now = time.time()
    for uid in uids:
        entries[nodegroup_key(uid)] = NodeGroupRecord(uid=uid, host="10.0.0.1", ports=list(range(receivers)),
                                                      node="nid001", rank=0, status="idle").encode()
        entries[status_key("nodegroup", uid)] = ServiceStatus(
            state="idle", scan=scans, messages=1000, bytes=10**9, updated_s=now,
            extra={"frames_complete": 100, "frames_incomplete": 0, "pool_slots_in_use": 0, "malformed": 0}).encode()
    for r in range(receivers):
        entries[status_key("aggregator", f"t{r}")] = ServiceStatus(state="idle", scan=scans, messages=10**6,
                                                                   bytes=10**11, updated_s=now,
                                                                   extra={"lost": 0, "open_scans": 0}).encode()
        for t in range(threads):
            entries[status_key("producer", f"r{r}t{t}")] = ServiceStatus(
                state="finished", scan=scans, messages=2048, bytes=2048 * 165888, updated_s=now,
                extra={"receiver": r, "thread": t, "mode": "stream"}).encode()
    positions = 128 * 128
    for scan in range(1, scans + 1):
        entries[scan_request_key(scan)] = ScanRequestRecord(
            scan_number=scan, scan_x=128, scan_y=128, source="simulator", routing=uids,
            producer_threads=[threads] * receivers, requested_s=now - 100 + scan).encode()
        per_group = {uid: positions // groups for uid in uids}
        for r in range(receivers):
            entries[scan_relay_key(scan, r)] = RelayScanRecord(thread=r, complete=True, forwarded=per_group, lost={},
                                                               dead=[], updated_s=now).encode()
            for t in range(threads):
                entries[scan_producer_key(scan, r, t)] = ProducerScanRecord(
                    receiver=r, thread=t, state="finished", routing=uids, counts={}, owned=positions // threads,
                    lost_upstream=0, sent=positions // threads, spilled=0, spill_file="", partial=False, error="",
                    updated_s=now).encode()
        for uid in uids:
            entries[scan_nodegroup_key(scan, uid)] = NodeGroupScanRecord(
                uid=uid, expected=[positions // groups] * receivers, received=[positions // groups] * receivers,
                frames_complete=positions // groups, frames_incomplete=0,
                sectors_counted=receivers * positions // groups, late=0, duplicates=0, timed_out=False,
                updated_s=now).encode()
        entries[scan_file_key(scan)] = ScanFileRecord(
            outcome=OUTCOME_COMPLETE, path=f"/data/FOURD_{scan:010d}_counted.h5", extra_paths=[], positions=positions,
            frames_written=positions, positions_missing=0, sectors_counted=[positions] * receivers, reason="",
            written_s=now - 90 + scan).encode()
    return entries


def best_ms(action) -> float:
    """The best of REPEATS timings of ``action``, each looped for at least MIN_REPEAT_S, in ms per call."""
    best = float("inf")
    for _ in range(REPEATS):
        calls, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < MIN_REPEAT_S or calls == 0:
            action()
            calls += 1
        best = min(best, elapsed / calls * 1000)
    return best


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    from prometheus_client import generate_latest

    from sectorflow.dashboard.follower import SCAN_MARGIN
    from sectorflow.dashboard.scan_groups import group_scans
    from sectorflow.dashboard.metrics import make_registry
    from sectorflow.dashboard.view import Remembered, build_view

    rows = []
    for receivers, threads, groups, scans in SIZES:
        entries = replica(receivers, threads, groups, scans)
        memory = Remembered()
        keep = config.dashboard.recent_scans + SCAN_MARGIN
        registry, durations = make_registry(lambda: entries, lambda: True)

        def update() -> dict:
            # What the follower does each update: group the replica by scan and drop the older
            # scans' records once, feed the scan-duration histogram, build the state.
            recent = group_scans(entries).newest(keep)
            durations.observe(recent)
            return build_view(recent, time.time(), memory, reachable=True, address="tcp://x:1", sequence=1,
                              recent_scans=config.dashboard.recent_scans)

        view_ms = best_ms(update)

        def scrape() -> bytes:
            return generate_latest(registry)

        metrics_ms = best_ms(scrape)
        core = view_ms / config.dashboard.update_ms
        rows.append([receivers, threads, groups, scans, len(entries), round(view_ms, 2), round(metrics_ms, 2),
                     round(100 * core, 1)])
    return BenchmarkResult(
        columns=["receivers", "threads/receiver", "NodeGroups", "scans", "keys", "update ms", "scrape ms",
                 f"% core at update_ms={config.dashboard.update_ms}"],
        rows=rows,
        notes=["an update accounts the recent_scans + 10 newest scans of the replica (the follower drops the "
               f"older scans' records first: {config.dashboard.recent_scans + 10} scans here), re-decoding only "
               "the scans whose records changed, and feeds the scan-duration histogram: the figures are the steady "
               f"state between scans (best of {REPEATS}); a scrape reads every status and registration"],
        details={"sizes": SIZES},
    )


def plot(result: BenchmarkResult, path: Path) -> None:
    from bench.plots import figure

    keys = [row[4] for row in result.rows]
    with figure(path, 1, "dashboard: cost of one update and one scrape") as (panel,):
        panel.plot(keys, [row[5] for row in result.rows], "o-", label="page update (build_view)")
        panel.plot(keys, [row[6] for row in result.rows], "s-", label="/metrics scrape")
        panel.set_xscale("log")
        panel.set_xlabel("keys in the replica")
        panel.set_ylabel("ms")
        panel.legend()
