"""PvaPy side by side: the relay path of APS's PvaPy, its area-detector simulator ->
mirror server -> HPC consumer (EPICS pvAccess, each a process), against sectorflow's stack, at the
4D Camera's frame (576 x 576 uint16, 663,552 bytes), in one run.

PvaPy: the simulator publishes at a frame rate asked of it for RUN_S seconds; the consumer counts
what it received and what it missed (its processor's ``nMissed``, the pvAccess monitor's
``nOverruns``). The rate is raised step by step until a frame is lost; the highest rate with none
lost is PvaPy's lossless rate. Where the simulator could not publish as fast as asked, the ladder
stops there and the note says so: its own publishing, not the relay, was the bound. PvaPy finds
its channels by UDP broadcast, which loopback cannot carry: its processes run in a network
namespace of their own with a veth pair (harness/netlab/one_host.py; needs root).

sectorflow: a scan of SCAN positions through the whole local stack (producers -> aggregator ->
NodeGroups under MPI, the configuration's receivers and threads) as fast as it goes, counting off
(the NodeGroups assemble the frames and write them, as PvaPy's consumer only receives) and on;
sectorflow does not drop a frame when it cannot keep up, it slows its producers, so its lossless
rate is the rate of a whole scan, request to file, every frame complete.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from bench import BenchmarkResult, RunOptions, Target
from bench.stack_run import run_stack_scan
from sectorflow.configs import Config

if TYPE_CHECKING:
    from harness.netlab.one_host import OneHost

log = logging.getLogger(__name__)

DESCRIPTION = "PvaPy's simulator -> mirror -> consumer against sectorflow's stack: highest lossless frames/s"
FRAME = (576, 576)
RUN_S = 10.0
# PvaPy's frame-rate ladder, frames/s; --quick stops at the first three.
RATES = (50, 100, 200, 300, 400, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000)
# sectorflow's scan: 16,384 frames (--quick: 4,096).
SCAN, QUICK_SCAN = (128, 128), (64, 64)
TARGET = 1.3
# The simulator publishes "fast enough" at this share of the asked rate.
PUBLISHED_SHARE = 0.97
CHANNEL, MIRROR = "sfbench:image", "sfbench:mirror"
START_DELAY_S = 3.0  # the simulator waits for the mirror and the consumer to subscribe


def _tool(name: str) -> str:
    # The venv's own bin first: `make bench` and `.venv/bin/python -m bench` run it without
    # activating the venv, so its console scripts are not on PATH.
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    path = shutil.which(name, path=search)
    if path is None:
        raise RuntimeError(f"{name} not found: install the optional group 'pvapy' (pip install '.[pvapy]')")
    return path


def _last(pattern: str, text: str) -> int | None:
    found = re.findall(pattern, text)
    return int(found[-1]) if found else None


def _pvapy_run(host: OneHost, rate: int, workdir: Path) -> dict[str, float]:
    """One run of PvaPy's path at ``rate`` frames/s: frames published, received, missed, overruns."""
    env = {**os.environ, "EPICS_PVA_ADDR_LIST": host.broadcast, "EPICS_PVA_AUTO_ADDR_LIST": "NO"}
    frames = int(rate * RUN_S)
    logs = {name: workdir / f"{name}-{rate}.log" for name in ("mirror", "consumer", "simulator")}
    commands = {
        "mirror": [_tool("pvapy-mirror-server"), "-cm", f"({MIRROR},{CHANNEL},pva,1000)",
                   "-rt", str(RUN_S + 3 * START_DELAY_S)],
        "consumer": [_tool("pvapy-hpc-consumer"), "-ic", MIRROR, "-im", "pva", "-rt", str(RUN_S + 2 * START_DELAY_S),
                     "-rp", str(RUN_S + 2 * START_DELAY_S - 0.5), "-dc", "-rqs", "1000"],
        "simulator": [_tool("pvapy-ad-sim-server"), "-cn", CHANNEL, "-nx", str(FRAME[1]), "-ny", str(FRAME[0]),
                      "-dt", "uint16", "-fps", str(rate), "-nf", "100", "-rt", str(RUN_S), "-std", str(START_DELAY_S),
                      "-rp", "1", "-dc"],
    }
    processes = []
    try:
        for name, argv in commands.items():
            out = logs[name].open("w")
            processes.append(subprocess.Popen(host.command(argv), stdout=out, stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True))
        for process in processes:
            process.wait(timeout=RUN_S + 10 * START_DELAY_S + 30)
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()
    consumer, simulator = logs["consumer"].read_text(), logs["simulator"].read_text()
    published = _last(r"Published frame id\s+(\d+)", simulator)
    rates = re.findall(r"frame rate: ([\d.]+)fps", simulator)
    received = _last(r"'nProcessed': (\d+)", consumer)
    missed = _last(r"'nMissed': (\d+)", consumer)
    overruns = _last(r"'nOverruns': (\d+)", consumer)
    if published is None or received is None or missed is None or overruns is None:
        raise RuntimeError(f"PvaPy at {rate} frames/s said nothing to count; see {logs['simulator']} and "
                           f"{logs['consumer']}")
    return {"asked": rate, "frames": frames, "published": published, "published_rate": float(rates[-1]),
            "received": received, "missed": missed, "overruns": overruns}


def _lossless(run: dict[str, float]) -> bool:
    return run["missed"] == 0 and run["overruns"] == 0 and run["received"] >= run["published"]


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    from harness.netlab.one_host import OneHost

    rows, notes = [], []
    pvapy_best, bound_by_simulator = 0.0, False
    with tempfile.TemporaryDirectory(prefix="bench-pvapy-") as work, OneHost("pvapy") as host:
        for rate in RATES[:3] if options.quick else RATES:
            result = _pvapy_run(host, rate, Path(work))
            lossless = _lossless(result)
            log.info("PvaPy at %d frames/s: published %d at %.0f frames/s, received %d, missed %d, overruns %d",
                     rate, result["published"], result["published_rate"], result["received"], result["missed"],
                     result["overruns"])
            rows.append(["PvaPy sim -> mirror -> consumer", rate, result["published_rate"], result["received"],
                         result["missed"] + result["overruns"], lossless])
            if result["published_rate"] < PUBLISHED_SHARE * rate:
                bound_by_simulator = True
                notes.append(f"PvaPy's simulator published {result['published_rate']:.0f} frames/s when asked for "
                             f"{rate}: its own publishing bounds the ladder here, not the relay.")
                if lossless:
                    pvapy_best = max(pvapy_best, result["published_rate"])
                break
            if not lossless:
                break
            pvapy_best = float(rate)
    scan = QUICK_SCAN if options.quick else SCAN
    ours = {}
    for counting in (False, True):
        with tempfile.TemporaryDirectory(prefix="bench-pvapy-ours-") as work:
            done = run_stack_scan(config, *scan, Path(work), counting=counting)
        name = f"sectorflow, counting {'on' if counting else 'off'}"
        lossless = done.complete == done.frames and done.missing == 0 and done.incomplete == 0
        ours[counting] = done.frames_per_s if lossless else 0.0
        rows.append([name, "as fast as it goes", done.frames_per_s, done.complete, done.frames - done.complete,
                     lossless])
    if pvapy_best:
        share = ours[False] / pvapy_best
        measured = f"{share:.2f}x"
    else:  # PvaPy lost frames at every rate tried: the ratio is at least ours over the lowest rate
        share = ours[False] / RATES[0]
        measured = f">= {share:.2f}x (PvaPy lost frames at {RATES[0]} frames/s)"
    notes += [
        f"frames of {FRAME[0]} x {FRAME[1]} uint16 (663,552 bytes); PvaPy for {RUN_S:.0f} s per rate, its processes in "
        "a network namespace of their own; sectorflow a "
        f"{scan[0]} x {scan[1]} scan from request to file (its stack's start-up not counted), on this machine's cores "
        "like PvaPy's.",
        f"highest lossless frames/s: PvaPy {pvapy_best:.0f}"
        + (" (bounded by its simulator)" if bound_by_simulator else "")
        + f", sectorflow counting off {ours[False]:.0f} ({measured}), counting on {ours[True]:.0f}.",
    ]
    targets = [Target("sectorflow (counting off) vs PvaPy's relay path, highest lossless frames/s", f">= {TARGET}x",
                      measured, share >= TARGET)]
    return BenchmarkResult(columns=["path", "asked frames/s", "frames/s", "frames received", "frames lost",
                                    "lossless"], rows=rows, notes=notes, targets=targets)


def plot(result: BenchmarkResult, path: Path) -> None:
    """Frames/s per path and asked rate, lossless runs solid."""
    from bench.plots import figure

    with figure(path, 1, "PvaPy vs sectorflow, 576 x 576 frames") as (axis,):
        labels = [f"{row[0].split(' ')[0]}\n{row[1]}" for row in result.rows]
        axis.bar(labels, [row[2] for row in result.rows],
                 color=["tab:green" if row[5] else "tab:red" for row in result.rows])
        axis.set_ylabel("frames/s")
        axis.tick_params(axis="x", labelsize=6)
