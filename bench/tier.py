"""Aggregation tier (protocol/SPEC.md, "The aggregation tier"): the whole path's rate through
k = 1, 2, 3, 4 aggregator hosts, each host's link capped by ``tc tbf`` so that the cap, like a NIC,
bounds each host (harness/netlab: the beamline's hosts as network namespaces, the NodeGroups behind
the delay line).

Per k, on a fresh topology: four producer hosts (2 threads each) -> k aggregator hosts (member i on
agg, agg2, ...; each link capped at ``CAP_MB_S`` per direction) -> the WAN -> a NodeGroup job of two
ranks on the two compute nodes (``--no-counting``: transport, not counting). After a warm-up scan
(the aggregators connect to the NodeGroups at the first), a small and a large scan with ``sectorflow
acquire --wait``; the rate is the large scan's extra frames over its extra seconds, so the acquire
command's own overhead cancels out. The large scan grows with k (``FRAMES_PER_HOST`` x k frames), so
every k streams about as long. Each aggregator's CPU-s per GB is its process's CPU time (all
threads, /proc) over the large scan, over the bytes its relay records say it forwarded.

A reference row, k = 1 with no cap, shows what this machine's cores carry through the same path:
the cap must stay well below it (k x cap too), or the cores, not the caps, set the rate.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import BenchmarkResult, RunOptions, Target
from bench.proc_stats import cpu_seconds
from bench.ratios import median, ratio
from bench.wan import scan_seconds
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.orchestration.supervisor import Supervisor

log = logging.getLogger(__name__)

DESCRIPTION = "whole path through k = 1..4 aggregator hosts, each link capped by tbf: rate and CPU-s/GB per aggregator"

TIERS = (1, 2, 3, 4)
# Per aggregator host and direction: k = 4 under it is a fifth of the uncapped path here, so that the
# caps, not the two cores every namespace shares, bound the path (at 20 MB/s, k = 4 carried 0.83 of 4
# x k = 1 with the machine busy: the cores, not the links, were then the bound).
CAP_MB_S = 10.0
SMALL = (4, 4)
FRAMES_PER_HOST = 256  # the large scan: this many frames per aggregator host, about 17 s at the cap
QUICK_FRAMES_PER_HOST = 128
MTU = 9000  # jumbo frames, as bench/wan.py: the delay line moves a packet per system call
ROUNDS = 3  # every k this many times, interleaved; medians
QUICK_ROUNDS = 1
# A saturated link stalls a TCP stream for seconds now and then (tbf drops, retransmission backoff):
# with the default 5 s, an aggregator took a NodeGroup that reads on as dead (seen at k = 4). The
# bench measures rate, not that policy: both sides wait this long before they give a peer up.
SEND_TIMEOUT_MS = 60_000
RATE_GOAL = 0.9  # rate(k) >= this x k x rate(1)
CPU_FLAT = 0.10  # each k's CPU-s/GB within this of k = 1's


def large_shape(frames: int) -> tuple[int, int]:
    """A scan shape of ``frames`` frames (a multiple of 32)."""
    return (32, frames // 32)


def _measure(k: int, cap_mb_s: float | None, frames_per_host: int, frame_bytes: int,
             sector_bytes: int) -> dict[str, Any]:
    from harness.netlab import Topology
    from harness.netlab.stack import NetlabStack, netlab_config, tier_overrides

    tag = f"k{k}-{'uncapped' if cap_mb_s is None else f'{cap_mb_s:g}MBs'}"
    large = large_shape(frames_per_host * k)
    cap_mbit = None if cap_mb_s is None else cap_mb_s * 8
    with tempfile.TemporaryDirectory(prefix=f"bench-tier-{tag}-") as work, \
            Topology(mtu=MTU, aggregators=k, aggregator_rate_mbit=cap_mbit) as net, \
            Supervisor(Path(work) / "run") as supervisor:
        config, path = netlab_config(Path(work), aggregator={**tier_overrides(net), "send_timeout_ms": SEND_TIMEOUT_MS},
                                     producer={"send_timeout_ms": SEND_TIMEOUT_MS},
                                     security={"enabled": False, "allow_insecure": True})
        stack = NetlabStack(net, config, path, supervisor)
        stack.start()
        stack.start_nodegroups(("compute1", "compute2"), "--no-counting")
        members = ["aggregator", *(f"aggregator-{i}" for i in range(1, k))]
        scan_seconds(stack, 1, SMALL)  # warm-up: the aggregators connect to the NodeGroups at a first scan
        small_s = scan_seconds(stack, 2, SMALL)
        cpu_before = [cpu_seconds(supervisor.process(name).pid) or 0.0 for name in members]
        large_s = scan_seconds(stack, 3, large)
        cpu_after = [cpu_seconds(supervisor.process(name).pid) or 0.0 for name in members]
        records = stack.relayed(3)
        records.pop(-1)
        stack.stop()
    forwarded = [0] * k
    for thread, relay in records.items():
        forwarded[thread // config.n_receivers] += relay["forwarded"]
    cpu_per_gb = [ratio(after - before, sectors * sector_bytes / 1e9)
                  for before, after, sectors in zip(cpu_before, cpu_after, forwarded)]
    frames = large[0] * large[1] - SMALL[0] * SMALL[1]
    rate = frames / (large_s - small_s) if large_s > small_s else 0.0
    log.info("%s: %.0f frames/s, %.1f MB/s, CPU-s/GB per member %s", tag, rate, rate * frame_bytes / 1e6,
             ", ".join(f"{c:.2f}" for c in cpu_per_gb))
    return {"k": k, "cap_mb_s": cap_mb_s, "frames_s": rate, "mb_s": rate * frame_bytes / 1e6, "small_s": small_s,
            "large_s": large_s, "large_frames": large[0] * large[1], "forwarded_sectors": forwarded,
            "cpu_s": [after - before for before, after in zip(cpu_before, cpu_after)], "cpu_s_per_gb": cpu_per_gb}


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """The uncapped reference, then every k under the cap, interleaved over the rounds; see the module docstring."""
    from harness.netlab.delay_line import program

    program()  # fails early without the delay line
    d = config.detector
    frame_bytes = d.frame_rows * d.frame_cols * 2
    sector_bytes = d.sector_rows * d.sector_cols * 2
    per_host = QUICK_FRAMES_PER_HOST if options.quick else FRAMES_PER_HOST
    reference = _measure(1, None, per_host * TIERS[-1], frame_bytes, sector_bytes)
    runs: dict[int, list[dict[str, Any]]] = {k: [] for k in TIERS}
    for _ in range(QUICK_ROUNDS if options.quick else ROUNDS):
        for k in TIERS:
            runs[k].append(_measure(k, CAP_MB_S, per_host, frame_bytes, sector_bytes))
    # Medians over the rounds: the machine is shared, one round is at the mercy of its neighbours.
    rate = {k: median(r["mb_s"] for r in measured) for k, measured in runs.items()}
    cpu = {k: median(median(r["cpu_s_per_gb"]) for r in measured) for k, measured in runs.items()}
    rows = [["1 (no cap)", "-", round(reference["frames_s"]), round(reference["mb_s"], 1), "-",
             round(median(reference["cpu_s_per_gb"]), 2), "-"]]
    for k in TIERS:
        rows.append([k, f"{CAP_MB_S:g}", round(rate[k] * 1e6 / frame_bytes), round(rate[k], 1),
                     round(ratio(rate[k], k * rate[1]), 2), round(cpu[k], 2), round(ratio(cpu[k], cpu[1]), 2)])
    worst_rate = min(ratio(rate[k], k * rate[1]) for k in TIERS)
    worst_cpu = max(abs(ratio(cpu[k], cpu[1]) - 1) for k in TIERS)
    notes = [
        f"whole path: 4 receiver hosts x 2 producer threads -> k aggregator hosts (agg, agg2, ...; each host's link "
        f"capped by tc tbf at {CAP_MB_S:g} MB/s each direction) -> the delay line (0 ms) -> 2 NodeGroup ranks on 2 "
        f"compute namespaces, --no-counting, MTU {MTU}; rate = (large - {SMALL[0]}x{SMALL[1]}) frames over the "
        f"difference of the two scans' acquire --wait times, large = {per_host} x k frames; {frame_bytes:,}-byte "
        "frames.",
        f"CPU-s/GB: each aggregator process's CPU time over the large scan (all threads, /proc) over the bytes its "
        f"relay records forwarded; the median over the members, then over the rounds.",
        f"{QUICK_ROUNDS if options.quick else ROUNDS} round(s), every k interleaved; medians. The reference row: "
        f"k = 1 uncapped, {per_host * TIERS[-1]} frames, once, before the rounds.",
        f"[aggregator] and [producer] send_timeout_ms = {SEND_TIMEOUT_MS:,} (defaults 5,000 and 10,000): a capped "
        "link's TCP stalls (tbf drops, retransmission backoff) once made an aggregator at k = 4 declare a NodeGroup "
        "that read on dead with the default.",
        f"every service on this machine's {os.cpu_count()} cores: the caps must bound each host, "
        f"so k x {CAP_MB_S:g} MB/s must stay below the reference row.",
    ]
    details = {"reference": reference, "runs": runs}
    return BenchmarkResult(
        columns=["aggregator hosts k", "cap MB/s per host", "frames/s", "MB/s", "/ (k x rate(1))",
                 "aggregator CPU-s/GB", "/ k = 1"],
        rows=rows, notes=notes, details=details,
        targets=[Target("tier: rate(k) / (k x rate(1)), worst k, hosts capped", f">= {RATE_GOAL}", f"{worst_rate:.2f}",
                        worst_rate >= RATE_GOAL),
                 Target("tier: aggregator CPU-s/GB vs k = 1, worst k", f"within {CPU_FLAT:.0%}", f"{worst_cpu:.0%}",
                        worst_cpu <= CPU_FLAT)],
    )


def plot(result: BenchmarkResult, path: Path) -> None:
    """The path's rate and each aggregator's CPU-s/GB against k, with the ideal k x rate(1)."""
    from bench.plots import figure

    rows = [row for row in result.rows if isinstance(row[0], int)]
    ks = [row[0] for row in rows]
    with figure(path, 2, "aggregation tier: k aggregator hosts, each link capped") as (left, right):
        left.plot(ks, [row[3] for row in rows], marker="o", label="measured")
        left.plot(ks, [k * rows[0][3] for k in ks], linestyle="--", label="k x rate(1)")
        left.set_ylabel("whole path, MB/s")
        left.legend()
        right.plot(ks, [row[5] for row in rows], marker="o")
        right.set_ylabel("aggregator CPU-s per GB")
        right.set_ylim(bottom=0)
        for axes in (left, right):
            axes.set_xlabel("aggregator hosts k")
            axes.set_xticks(ks)
