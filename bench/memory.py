"""Memory: the peak resident set (VmHWM) of every service for a scan and for one four times larger.

Each scan runs in a fresh local stack (bench/stack_run.py), so a peak belongs to one scan: the
kvstore, the aggregator, each producer daemon and each NodeGroup rank (the processes below
``mpiexec``). The target: the peaks must not grow with the scan. The same pair of scans runs with the
configured queue depths and with every queue (aggregator hwm, producer send_hwm, NodeGroup
recv_hwm) at ``ALTERNATIVE_HWM`` messages, the defaults before 2026-11-23: a queue holds up to hwm
sectors, so a peak follows the queue depth until a scan is long enough to fill the queues, which
looks like growth with the scan. The throughput of every run is reported beside it, so that
shallow queues are seen to cost nothing (or what it costs).
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

from bench import BenchmarkResult, RunOptions, Target
from bench.ratios import ratio
from bench.stack_run import StackScan, run_stack_scan
from sectorflow.configs import Config

log = logging.getLogger(__name__)

DESCRIPTION = "peak RSS (VmHWM) of every service for a scan and one 4x larger, with the configured queues and with queues of 1000"

SCANS = ((64, 64), (128, 128))  # a scan and one four times larger
ALTERNATIVE_HWM = 1000  # the default before 2026-11-23: its queues are what grew
GROWTH_LIMIT = 1.10  # "must not grow": at most 10% more for the 4x scan, for every service
# The NodeGroup without its copy: a rank's peak for the larger scan at most half of the copying NodeGroup's,
# which preallocated a pool of 256 frames (272 to 275 MiB per rank in this benchmark, 2026-11-24 07:03 UTC).
COPYING_NODEGROUP_MIB = 275.0
NODEGROUP_SHARE = 0.50


def mib(kib: int) -> float:
    return kib / 1024.0


def growth_rows(small: dict[str, int], large: dict[str, int]) -> list[tuple[str, float, float, float]]:
    """(service, small MiB, large MiB, large / small) for every service in both runs, in ``small``'s order."""
    return [(name, mib(small[name]), mib(large[name]), ratio(large[name], small[name]))
            for name in small if name in large]


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Both scans at both high-water marks; see the module docstring."""
    hwms = [config.aggregator.hwm] + ([ALTERNATIVE_HWM] if ALTERNATIVE_HWM != config.aggregator.hwm else [])
    scans: dict[int, list[StackScan]] = {}
    for hwm in hwms:
        changed = config if hwm == config.aggregator.hwm else dataclasses.replace(
            config, aggregator=dataclasses.replace(config.aggregator, hwm=hwm),
            producer=dataclasses.replace(config.producer, send_hwm=hwm),
            nodegroup=dataclasses.replace(config.nodegroup, recv_hwm=hwm))
        scans[hwm] = []
        for scan_x, scan_y in SCANS:
            with tempfile.TemporaryDirectory(prefix="bench-memory-") as work:
                scans[hwm].append(run_stack_scan(changed, scan_x, scan_y, Path(work)))
            log.info("hwm %d, %d x %d: %s", hwm, scan_x, scan_y, scans[hwm][-1].peak_rss_kib)

    (sx, sy), (lx, ly) = SCANS
    def label(hwm: int) -> str:
        return "configured queues" if hwm == config.aggregator.hwm else f"queues of {hwm}"

    columns = ["service"]
    for hwm in hwms:
        columns += [f"{label(hwm)}: {sx} x {sy} MiB", f"{label(hwm)}: {lx} x {ly} MiB", f"{label(hwm)}: growth"]
    table: dict[str, list] = {}
    growth: dict[int, dict[str, float]] = {}
    for hwm in hwms:
        small, large = scans[hwm]
        growth[hwm] = {}
        for name, small_mib, large_mib, grew in growth_rows(small.peak_rss_kib, large.peak_rss_kib):
            table.setdefault(name, [name]).extend([small_mib, large_mib, grew])
            growth[hwm][name] = grew
    rows = [row for row in table.values() if len(row) == len(columns)]
    throughput = ["frames/s (scan to file)"]
    for hwm in hwms:
        small, large = scans[hwm]
        throughput += [small.frames_per_s, large.frames_per_s, "-"]
    rows.append(throughput)

    configured = config.aggregator.hwm
    worst = max(growth[configured].items(), key=lambda item: item[1])
    targets = [Target(f"peak RSS, {lx} x {ly} vs {sx} x {sy} scan, every service (worst: {worst[0]}), "
                      "configured queues", f"<= {GROWTH_LIMIT:.2f}x", f"{worst[1]:.2f}x",
                      worst[1] <= GROWTH_LIMIT)]
    nodegroup_peak = max(mib(kib) for name, kib in scans[configured][1].peak_rss_kib.items()
                         if name.startswith("nodegroup"))
    share = nodegroup_peak / COPYING_NODEGROUP_MIB
    targets.append(Target(f"NodeGroup peak RSS, {lx} x {ly} scan, vs the copying NodeGroup's {COPYING_NODEGROUP_MIB:.0f} "
                          "MiB", f"<= {NODEGROUP_SHARE:.2f}", f"{share:.2f}", share <= NODEGROUP_SHARE))
    notes = [
        f"VmHWM from /proc/<pid>/status of each service process just before the stack stops; one fresh stack per "
        f"scan; {config.n_receivers} producer daemons, 2 NodeGroup ranks; aggregator hwm on both of its sockets per "
        f"thread; producer send_hwm {config.producer.send_hwm}, NodeGroup recv_hwm {config.nodegroup.recv_hwm}, pool "
        f"{config.nodegroup.pool_frames} frames of {config.detector.frame_rows} x {config.detector.frame_cols}.",
        "growth = peak for the larger scan / peak for the smaller one.",
    ]
    if len(hwms) > 1:
        alternative = max(growth[ALTERNATIVE_HWM].items(), key=lambda item: item[1])
        agg = {hwm: (mib(scans[hwm][1].peak_rss_kib.get("aggregator", 0))) for hwm in hwms}
        notes.append(f"aggregator peak for the larger scan: {agg[configured]:.0f} MiB with the configured queues, "
                     f"{agg[ALTERNATIVE_HWM]:.0f} MiB with queues of {ALTERNATIVE_HWM}; worst growth with queues of "
                     f"{ALTERNATIVE_HWM}: "
                     f"{alternative[0]} {alternative[1]:.2f}x; throughput of the larger scan "
                     f"{scans[configured][1].frames_per_s:,.0f} vs {scans[ALTERNATIVE_HWM][1].frames_per_s:,.0f} frames/s.")
    return BenchmarkResult(
        columns=columns, rows=rows, notes=notes, targets=targets,
        details={"scans": [f"{x}x{y}" for x, y in SCANS], "hwms": hwms,
                 "runs": {str(hwm): [dataclasses.asdict(s) for s in scans[hwm]] for hwm in hwms}},
    )


def plot(result: BenchmarkResult, path: Path) -> None:
    """Peak RSS per service, the two scans side by side, one panel per hwm."""
    import numpy as np

    from bench.plots import figure

    hwms = result.details["hwms"]
    small_name, large_name = result.details["scans"]
    with figure(path, len(hwms), "memory: peak RSS (VmHWM) per service") as axes:
        for panel, hwm in zip(axes, hwms):
            small, large = (run["peak_rss_kib"] for run in result.details["runs"][str(hwm)])
            names = [name for name in small if name in large]
            xs = np.arange(len(names))
            panel.bar(xs - 0.2, [mib(small[n]) for n in names], 0.4, label=f"{small_name} scan")
            panel.bar(xs + 0.2, [mib(large[n]) for n in names], 0.4, label=f"{large_name} scan (4x)")
            panel.set_xticks(xs, names, rotation=30, fontsize=8)
            panel.set_ylabel("MiB")
            panel.set_title("configured queues" if hwm == hwms[0] else f"queues of {hwm} messages")
            panel.legend()
