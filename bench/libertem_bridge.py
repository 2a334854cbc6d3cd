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
from dataclasses import replace
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
# (events per frame, scan side, target frames/s, the chunk size the target is for); --quick scans
# fewer positions. Each scenario runs with LiberTEM-live's stock shared-memory slots (the bridge's
# default chunk_bytes fills one) and with 4 MiB slots: few large chunks pay at high dose, where
# LiberTEM's cost per chunk dominates; at low dose large slots cost more than they save.
SCENARIOS = ((20, 256, 50000.0, 384 << 10), (2000, 64, 5000.0, 4 << 20))
CHUNK_SIZES = (384 << 10, 4 << 20)
QUICK_SIDE = 64
# The asi_tpx3 connection's default chunks per shared-memory slot.
CHUNKS_PER_STACK = 24
# The warm-up scan's side: LiberTEM compiles its decoders at its first acquisition.
WARM_UP_SIDE = 16
# LiberTEM-live running SumUDF on the bridge's acquisitions: python -c CLIENT PORT BYTES_PER_CHUNK ACQUISITIONS.
CLIENT = """
import sys, time
from libertem.executor.pipelined import PipelinedExecutor
from libertem.udf.sum import SumUDF
from libertem_live.api import LiveContext
executor = PipelinedExecutor(spec=PipelinedExecutor.make_spec(cpus=range(2), cudas=[]))
with LiveContext(executor=executor) as ctx:
    with ctx.make_connection("asi_tpx3").open(data_host="127.0.0.1", data_port=int(sys.argv[1]),
                                              bytes_per_chunk=int(sys.argv[2])) as conn:
        print("ready", flush=True)
        for _ in range(int(sys.argv[3])):  # acquisitions to serve
            pending = conn.wait_for_acquisition(300)
            aq = ctx.make_acquisition(conn=conn, pending_aq=pending)
            result = ctx.run_udf(dataset=aq, udf=SumUDF())
            print("done", time.monotonic(), float(result["intensity"].data.sum()), flush=True)
"""


class _Batches:
    """The live stream's batches of a warm-up scan, then, once ``go`` is set, of the measured scan:
    what a NodeGroup publisher would send."""

    def __init__(self, warm_up: list[wire.Batch], measured: list[wire.Batch]) -> None:
        self.publishers = {"bench"}
        self._warm_up = iter(warm_up)
        self._measured = iter(measured)
        self.go = threading.Event()
        self.first_at: float | None = None  # the measured scan's first batch

    def receive(self, timeout_ms: int) -> wire.Batch | None:
        batch = next(self._warm_up, None)
        if batch is None and self.go.is_set():
            batch = next(self._measured, None)
            if batch is not None and self.first_at is None:
                self.first_at = time.monotonic()
        if batch is None:
            time.sleep(timeout_ms / 1000)  # as a poll with nothing to read waits
        return batch

    def close(self) -> None:
        pass


def _batches(rng: np.random.Generator, scan: int, side: int, electrons: int) -> tuple[list[wire.Batch], int]:
    positions = side * side
    pixels = FRAME_SHAPE[0] * FRAME_SHAPE[1]
    # One pool of sorted frames reused: drawing 4 million frames would time numpy, not the bridge.
    pool = [np.sort(rng.choice(pixels, electrons, replace=False)).astype(np.uint32) for _ in range(64)]
    batches = []
    for first in range(0, positions, BATCH_FRAMES):
        frames = [pool[p % len(pool)] for p in range(first, min(positions, first + BATCH_FRAMES))]
        offsets = np.concatenate([[0], np.cumsum([len(f) for f in frames])]).astype(np.uint64)
        batches.append(wire.Batch(wire.FRAMES, "bench", scan, (side, side), FRAME_SHAPE, False,
                                  {"position": np.arange(first, first + len(frames), dtype=np.uint64),
                                   "offsets": offsets, "events": np.concatenate(frames)}))
    batches.append(wire.Batch(wire.FRAMES, "bench", scan, (side, side), FRAME_SHAPE, True,
                              {"position": np.zeros(0, np.uint64), "offsets": np.zeros(1, np.uint64),
                               "events": np.zeros(0, np.uint32)}))
    return batches, positions * electrons


def bytes_per_chunk(chunk_bytes: int) -> int:
    """The asi_tpx3 connection's bytes_per_chunk whose shared-memory slot (x its 24 chunks_per_stack)
    holds a chunk of ``chunk_bytes`` (libertem_bridge/SPEC.md): 16 KiB, its default, at least."""
    return max(16 << 10, -(-chunk_bytes // CHUNKS_PER_STACK))


def _one(config: Config, side: int, electrons: int, chunk_bytes: int) -> tuple[float, float]:
    """(frames/s to LiberTEM's result, frames/s the bridge wrote to LiberTEM's socket) of a scan
    served after a warm-up scan (LiberTEM compiles its decoders at its first acquisition)."""
    rng = np.random.default_rng(1)
    warm_up, _ = _batches(rng, 1, WARM_UP_SIDE, electrons)
    batches, total = _batches(rng, 2, side, electrons)
    server = AcquisitionServer("127.0.0.1", 0, config.libertem.queue_mib << 20)
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(server.address[1]),
                               str(bytes_per_chunk(chunk_bytes)), "2"], stdout=subprocess.PIPE, text=True)
    stop = threading.Event()
    thread: threading.Thread | None = None
    try:
        assert client.stdout is not None
        assert client.stdout.readline().strip() == "ready"
        wait_until(lambda: server.connected, 60, "LiberTEM to connect")
        source = _Batches(warm_up, batches)
        bridge = Bridge(replace(config, libertem=replace(config.libertem, chunk_bytes=chunk_bytes)), server, source)
        thread = threading.Thread(target=bridge.run, args=(stop,))
        thread.start()
        assert client.stdout.readline().split()[0] == "done"  # the warm-up scan
        source.go.set()
        wait_until(lambda: bridge.counters.last_scan == 2 and server.drained(), 300, "the bridge to send the scan")
        written_at = time.monotonic()
        line = client.stdout.readline().split()
        assert client.wait(60) == 0 and line[0] == "done", line
        if float(line[2]) != total:
            raise RuntimeError(f"LiberTEM summed {line[2]} events, the bridge sent {total}")
        assert source.first_at is not None
        return side * side / (float(line[1]) - source.first_at), side * side / (written_at - source.first_at)
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        if client.poll() is None:
            client.kill()
            client.wait()
        server.close()


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    rows, targets = [], []
    for electrons, side, goal, target_chunk in SCENARIOS:
        side = min(side, QUICK_SIDE) if options.quick else side
        for chunk in CHUNK_SIZES:
            rate, written = _one(config, side, electrons, chunk)
            log.info("%d e/frame, %d KiB chunks: %.0f frames/s to LiberTEM's result, %.0f frames/s written",
                     electrons, chunk >> 10, rate, written)
            rows.append([f"{electrons} e/frame", f"{chunk >> 10} KiB", side * side, rate, written])
            if chunk == target_chunk:
                targets.append(Target(f"LiberTEM bridge to SumUDF at {electrons} e/frame, {chunk >> 10} KiB chunks",
                                      f">= {goal:.0f} frames/s", f"{rate:.0f} frames/s", rate >= goal))
    notes = ["frames/s: the scan's positions over the time from the bridge's first batch to LiberTEM-live's "
             "SumUDF result of the whole scan (the result checked against the events sent), after a "
             f"{WARM_UP_SIDE} x {WARM_UP_SIDE} warm-up scan on the same connection (LiberTEM compiles its "
             "decoders at its first acquisition), LiberTEM's connection opened with bytes_per_chunk = chunks / 24 "
             "(its slot holds one chunk); written: to the time the bridge had written the whole scan "
             "to LiberTEM's socket (bounded by how fast LiberTEM reads). The live stream's ZeroMQ reading is not "
             "in it (bench 'pipeline' measures the NodeGroups).",
             "the machine is shared with other work: the load average above says how busy it was."]
    return BenchmarkResult(columns=["scenario", "chunks", "frames", "frames/s", "written frames/s"], rows=rows,
                           notes=notes,
                           targets=targets)


def plot(result: BenchmarkResult, path: Path) -> None:
    """Frames/s per scenario."""
    from bench.plots import figure

    with figure(path, 1, "LiberTEM bridge to SumUDF (576 x 576)") as (axis,):
        axis.bar([f"{row[0]}\n{row[1]}" for row in result.rows], [row[3] for row in result.rows])
        axis.set_ylabel("frames/s")
