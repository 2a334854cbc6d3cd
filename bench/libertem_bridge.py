"""The LiberTEM bridge's rate: counted frames of 576 x 576 pixels at 20 and at 2,000 events per
frame, handed to the bridge as the live stream's batches would be (1,024 frames each, positions
in order), served as one asi_tpx3 acquisition to a real LiberTEM-live client running SumUDF
(a PipelinedExecutor of 2 workers) in its own process. The rate is the scan's frames over the time
from the bridge's first frame to LiberTEM's result of the whole scan."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from bench import BenchmarkResult, RunOptions, Target
from sectorflow.configs import Config
from sectorflow.libertem_bridge import AcquisitionServer, Bridge
from sectorflow.live import wire
from sectorflow.waiting import wait_until

log = logging.getLogger(__name__)

DESCRIPTION = "LiberTEM bridge frames/s to a real LiberTEM-live client running SumUDF, 576 x 576 frames"
FRAME_SHAPE = (576, 576)
BATCH_FRAMES = 1024
# (events per frame, scan side, target frames/s); --quick scans fewer positions.
SCENARIOS = ((20, 256, 50000.0), (2000, 64, 5000.0))
QUICK_SIDE = 64
CLIENT = """
import sys, time
from libertem.executor.pipelined import PipelinedExecutor
from libertem.udf.sum import SumUDF
from libertem_live.api import LiveContext
executor = PipelinedExecutor(spec=PipelinedExecutor.make_spec(cpus=range(2), cudas=[]))
with LiveContext(executor=executor) as ctx:
    with ctx.make_connection("asi_tpx3").open(data_host="127.0.0.1", data_port=int(sys.argv[1])) as conn:
        print("ready", flush=True)
        pending = conn.wait_for_acquisition(300)
        aq = ctx.make_acquisition(conn=conn, pending_aq=pending)
        result = ctx.run_udf(dataset=aq, udf=SumUDF())
        print("done", time.monotonic(), float(result["intensity"].data.sum()), flush=True)
"""


class _Batches:
    """The live stream's batches of one scan, then its end: what a NodeGroup publisher would send."""

    def __init__(self, batches: list[wire.Batch]) -> None:
        self.publishers = {"bench"}
        self._batches = iter(batches)
        self.first_at: float | None = None

    def receive(self, timeout_ms: int) -> wire.Batch | None:
        batch = next(self._batches, None)
        if batch is None:
            time.sleep(timeout_ms / 1000)  # as a poll with nothing to read waits
        elif self.first_at is None:
            self.first_at = time.monotonic()
        return batch

    def close(self) -> None:
        pass


def _batches(rng: np.random.Generator, side: int, electrons: int) -> tuple[list[wire.Batch], int]:
    positions = side * side
    pixels = FRAME_SHAPE[0] * FRAME_SHAPE[1]
    # One pool of sorted frames reused: drawing 4 million frames would time numpy, not the bridge.
    pool = [np.sort(rng.choice(pixels, electrons, replace=False)).astype(np.uint32) for _ in range(64)]
    batches = []
    for first in range(0, positions, BATCH_FRAMES):
        frames = [pool[p % len(pool)] for p in range(first, min(positions, first + BATCH_FRAMES))]
        offsets = np.concatenate([[0], np.cumsum([len(f) for f in frames])]).astype(np.uint64)
        batches.append(wire.Batch(wire.FRAMES, "bench", 1, (side, side), FRAME_SHAPE, False,
                                  {"position": np.arange(first, first + len(frames), dtype=np.uint64),
                                   "offsets": offsets, "events": np.concatenate(frames)}))
    batches.append(wire.Batch(wire.FRAMES, "bench", 1, (side, side), FRAME_SHAPE, True,
                              {"position": np.zeros(0, np.uint64), "offsets": np.zeros(1, np.uint64),
                               "events": np.zeros(0, np.uint32)}))
    return batches, positions * electrons


def _one(config: Config, side: int, electrons: int) -> float:
    batches, total = _batches(np.random.default_rng(1), side, electrons)
    server = AcquisitionServer("127.0.0.1", 0, config.libertem.queue_mib << 20)
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(server.address[1])], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert client.stdout is not None
        assert client.stdout.readline().strip() == "ready"
        wait_until(lambda: server.connected, 60, "LiberTEM to connect")
        source = _Batches(batches)
        bridge = Bridge(config, server, source)
        stop = threading.Event()
        thread = threading.Thread(target=bridge.run, args=(stop,))
        thread.start()
        line = client.stdout.readline().split()
        stop.set()
        thread.join()
        assert client.wait(60) == 0 and line[0] == "done", line
        if float(line[2]) != total:
            raise RuntimeError(f"LiberTEM summed {line[2]} events, the bridge sent {total}")
        assert source.first_at is not None
        return side * side / (float(line[1]) - source.first_at)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        server.close()


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    rows, targets = [], []
    for electrons, side, goal in SCENARIOS:
        side = min(side, QUICK_SIDE) if options.quick else side
        rate = _one(config, side, electrons)
        log.info("%d e/frame: %.0f frames/s", electrons, rate)
        rows.append([f"{electrons} e/frame", side * side, rate])
        targets.append(Target(f"LiberTEM bridge to SumUDF at {electrons} e/frame", f">= {goal:.0f} frames/s",
                              f"{rate:.0f} frames/s", rate >= goal))
    notes = ["frames/s: the scan's positions over the time from the bridge's first batch to LiberTEM-live's "
             "SumUDF result of the whole scan (the result checked against the events sent); the live stream's "
             "ZeroMQ reading is not in it (bench 'pipeline' measures the NodeGroups).",
             "the machine is shared with other work: the load average above says how busy it was."]
    return BenchmarkResult(columns=["scenario", "frames", "frames/s"], rows=rows, notes=notes, targets=targets)


def plot(result: BenchmarkResult, path: Path) -> None:
    """Frames/s per scenario."""
    from bench.plots import figure

    with figure(path, 1, "LiberTEM bridge to SumUDF (576 x 576)") as (axis,):
        axis.bar([row[0] for row in result.rows], [row[2] for row in result.rows])
        axis.set_ylabel("frames/s")
