"""Rank 0's write of a counted scan: its peak RSS, the write time and the
file size per scan size, with and without compression ([nodegroup] compression), against the old
way (the whole scan gathered in memory, then written by write_counted_scan).

Each run is a fresh process playing rank 0 (its VmHWM is the run's alone): a ScanGatherer of a job
of ``GROUPS`` NodeGroups takes each NodeGroup's part as another rank sends it, in pieces of
``PIECE_EVENTS`` events (GroupResult.split), each piece through pickle as MPI carries it, then
writes the file. The events are synthetic, ``ELECTRONS`` per frame (the target's 2,000; a frame of
576 x 576 pixels: the counted file's size follows the events, not the raw frames), generated a
piece at a time so that the generator holds no more than a piece either. "old way" runs build the
scan's per-position list of events and call write_counted_scan, as gather.py did before.

"nodegroup" runs: rank 0's own NodeGroup counts its share of the scan (part 0, a real C++
NodeGroup of this process with its counting threads, settings_from of the configuration, fed raw
576 x 576 frames of about ``ELECTRONS`` electrons over its TCP ports by a sender thread: 4 sectors a
frame, one per receiver, with the info messages, as the aggregator sends them), handing its counted
frames out in pieces while the scan runs (gather.RunningParts, as the service's loop does), while the
other parts come as above: the process's peak is rank 0's with its NodeGroup. "nodegroup-held" runs
the same with ``drain_events`` 0: the NodeGroup holds its part until the scan ends, as before the
pieces went out during the scan. ``SECTORFLOW_BENCH_COUNTED_WRITE_SIZES`` (e.g. ``128,512``) runs
those sizes only, every way, uncompressed (a run shorter than the full one; the table says which).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import BenchmarkResult, RunOptions, Table, Target
from sectorflow.configs import Config
from sectorflow.configs.schema import NodegroupConfig

log = logging.getLogger(__name__)

DESCRIPTION = "rank 0's counted-file write: peak RSS, time and size per scan size, compressed or not, vs the old gather"

FRAME = (576, 576)
ELECTRONS = 2000
GROUPS = 4  # 2 ranks of 2 NodeGroups; part g holds the positions p with p % GROUPS == g
FULL_SIZES = (128, 256, 512, 1024)
OWN_SIZES = (128, 512, 1024)  # with rank 0's own NodeGroup counting its share
SIZES_VARIABLE = "SECTORFLOW_BENCH_COUNTED_WRITE_SIZES"
RAW_FRAMES = 16  # distinct raw frames the sender cycles through
QUICK_SIZES = (128, 256)
OLD_WAY_SIZES = (128, 256)  # the whole scan in memory: 8 bytes per event and more, kept small
TARGET_MIB = 1024.0  # the target: rank 0 under 1 GB for 1024 x 1024 at 2,000 electrons per frame
PIECE_EVENTS = NodegroupConfig().gather_piece_events


def frames_events(positions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``ELECTRONS`` strictly ascending pixel indices per position, as one (positions, ELECTRONS) array."""
    pixels = FRAME[0] * FRAME[1]
    draws = np.sort(rng.integers(0, pixels - ELECTRONS + 1, size=(len(positions), ELECTRONS), dtype=np.uint32), axis=1)
    return draws + np.arange(ELECTRONS, dtype=np.uint32)


def vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def child(size: int, compression: str, way: str, directory: str) -> dict[str, Any]:
    """One run in this process: rank 0's part of a size x size scan; what it measured."""
    from sectorflow.consumer.nodegroup.gather import GroupResult, ScanGatherer

    rng = np.random.default_rng(size)
    positions = size * size
    uids = [f"ng-{g}" for g in range(GROUPS)]
    counts = {"frames_complete": 0, "frames_incomplete": 0, "uncounted_frames": 0, "late_messages": 0,
              "duplicate_sectors": 0, "evicted_frames": 0}
    started = time.perf_counter()
    if way == "old":
        from sectorflow.consumer.counting import write_counted_scan

        events = [None] * positions
        for g in range(GROUPS):
            mine = np.arange(g, positions, GROUPS)
            block = frames_events(mine, rng)
            for i, p in enumerate(mine):
                events[p] = block[i]
        generated = time.perf_counter()
        last = time.perf_counter()
        path = write_counted_scan(Path(directory) / "old.h5", events, scan_shape=(size, size), frame_shape=FRAME,
                                  compression=compression)
        done = time.perf_counter()
        return {"peak_kib": vm_hwm_kib(), "bytes": path.stat().st_size, "total_s": done - started,
                "generate_s": generated - started, "final_s": done - last, "write_s": done - generated}
    gatherer = ScanGatherer(uids, directory, FRAME, gather_timeout_s=3600.0, receivers=4, compression=compression)
    per_piece = max(1, PIECE_EVENTS // ELECTRONS)  # as GroupResult.split cuts a part
    generate_s = 0.0
    own = OwnNodeGroup(size, uids[0], held=way == "nodegroup-held") if way.startswith("nodegroup") else None
    for g, uid in enumerate(uids):
        if own is not None and g == 0:
            continue  # rank 0's own NodeGroup counts this part
        mine = np.arange(g, positions, GROUPS, dtype=np.uint64)
        pieces = (len(mine) + per_piece - 1) // per_piece
        for k in range(pieces):
            if own is not None:
                for piece in own.pieces():
                    gatherer.add(piece)
            t = time.perf_counter()
            block = mine[k * per_piece:(k + 1) * per_piece]
            events = frames_events(block, rng).reshape(-1)
            piece = GroupResult(
                uid=uid, rank=g // 2, host="bench", scan_number=1, scan_x=size, scan_y=size, routing=uids,
                positions=block, events=events,
                offsets=np.arange(0, len(events) + 1, ELECTRONS, dtype=np.uint64), incomplete={},
                thresholds_known=False, statistics={}, threshold_error="", expected=[len(mine)] * 4,
                received=[len(mine)] * 4, timed_out=False, bytes=0,
                counts={**counts, "frames_complete": len(mine)}, sectors_counted=[len(mine)] * 4,
                piece=k, pieces=pieces)
            message = pickle.dumps(piece, protocol=pickle.HIGHEST_PROTOCOL)  # as MPI carries it
            del piece, events
            generate_s += time.perf_counter() - t
            gatherer.add(pickle.loads(message))
            del message
    if own is not None:
        for piece in own.finish():
            gatherer.add(piece)
    last = time.perf_counter()
    record = gatherer.write(1)
    done = time.perf_counter()
    assert record is not None and record.outcome == "complete", record
    out = {"peak_kib": vm_hwm_kib(), "bytes": Path(record.path).stat().st_size, "total_s": done - started,
           "generate_s": generate_s, "final_s": done - last, "write_s": done - started - generate_s}
    if own is not None:
        out.update(own.figures())
    return out


class OwnNodeGroup:
    """Rank 0's own NodeGroup counting part 0 of a size x size scan (positions p % GROUPS == 0):
    a C++ NodeGroup of this process fed raw frames by a sender thread, its counted frames taken as
    pieces while the scan runs (RunningParts), or, ``held``, only as the part at the scan's end."""

    def __init__(self, size: int, uid: str, held: bool) -> None:
        import threading

        from sectorflow._core.nodegroup import NodeGroup
        from sectorflow.configs import load_config
        from sectorflow.consumer.counting import calculate_thresholds
        from sectorflow.consumer.nodegroup.gather import RunningParts
        from sectorflow.consumer.nodegroup.nodegroup_service import settings_from
        from bench.counting import simulated_frames

        rng = np.random.default_rng(1000 + size)
        self.frames = simulated_frames(rng, RAW_FRAMES, np.full(FRAME, 20.0), ELECTRONS)
        statistics = calculate_thresholds(self.frames[:8])
        base = load_config()
        config = dataclasses.replace(
            base, counting=dataclasses.replace(base.counting, background_threshold=statistics.background_threshold,
                                               xray_threshold=statistics.x_ray_threshold, dark_reference=""),
            analysis=dataclasses.replace(base.analysis, live=False),
            nodegroup=dataclasses.replace(base.nodegroup, gather_piece_events=PIECE_EVENTS))
        assert (config.detector.frame_rows, config.detector.frame_cols) == FRAME
        settings = settings_from(config, uid, counting_threads=2)
        if held:
            settings.drain_events = 0  # the part stays in the NodeGroup until the scan ends
        self.config, self.uid, self.size = config, uid, size
        self.group = NodeGroup(settings)
        self.running = RunningParts(uid, 0, "bench", None, PIECE_EVENTS)
        self.taken_pieces = 0
        self.sender = threading.Thread(target=self._send, name="bench-sender", daemon=True)
        self.sender.start()

    def _send(self) -> None:
        import zmq

        from sectorflow.protocol import DataHeader, InfoMessage, encode_header, encode_info

        receivers = self.config.n_receivers
        rows = FRAME[0] // receivers
        sectors = [[self.frames[k, r * rows:(r + 1) * rows].tobytes() for r in range(receivers)]
                   for k in range(RAW_FRAMES)]
        context = zmq.Context()
        pushes = []
        for port in self.group.ports:
            push = context.socket(zmq.PUSH)
            push.setsockopt(zmq.SNDHWM, 16)  # as few queued here as the NodeGroup's recv_hwm: the sender is no rank's
            push.connect(f"tcp://127.0.0.1:{port}")
            pushes.append(push)
        mine = range(0, self.size * self.size, GROUPS)
        for f in mine:
            for r in range(receivers):
                header = DataHeader(scan_number=1, frame_number=f, sector=r, scan_x=self.size, scan_y=self.size,
                                    position_x=f % self.size, position_y=f // self.size)
                pushes[r].send_multipart([encode_header(header), sectors[(f // GROUPS) % RAW_FRAMES][r]], copy=False)
        for r in range(receivers):
            pushes[r].send(encode_info(InfoMessage(scan_number=1, receiver=r, thread_id=0, scan_x=self.size,
                                                   scan_y=self.size, routing=[self.uid],
                                                   counts={self.uid: len(mine)})))
        for push in pushes:
            push.close(linger=-1)
        context.term()

    def pieces(self) -> list[Any]:
        """The pieces of its part counted since (none while held)."""
        out = [p for pieces in self.running.take(self.group).values() for p in pieces]
        self.taken_pieces += len(out)
        return out

    def finish(self) -> Any:
        """The rest, as it comes: pieces until the scan's result came, then the part (its last piece)."""
        while (result := self.group.wait_scan(0.05)) is None:
            yield from self.pieces()
        yield from self.pieces()
        part, positions, _ = self.running.part(result)
        assert positions == len(range(0, self.size * self.size, GROUPS)) and not part.incomplete, (positions, part.counts)
        self.sender.join()
        self.group.stop()
        yield part

    def figures(self) -> dict[str, Any]:
        return {"own_pieces": self.taken_pieces, "pool_high_water": int(self.group.counters()["pool_bytes_high_water"])}


def run_child(size: int, compression: str, way: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-counted-write-") as directory:
        out = subprocess.run([sys.executable, "-m", "bench.counted_write", str(size), compression, way, directory],
                             check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    log.info("%d x %d, %s, %s: %s", size, size, compression, way, result)
    return result


def run(config: Config, options: RunOptions) -> BenchmarkResult:
    """Every size, both compressions, the new way; the old way for the small sizes."""
    del config
    chosen = os.environ.get(SIZES_VARIABLE, "")
    if chosen:  # a shorter run: these sizes, every way, uncompressed
        sizes = tuple(int(v) for v in chosen.split(","))
        compressions: tuple[str, ...] = ("none",)
    else:
        sizes = QUICK_SIZES if options.quick else FULL_SIZES
        compressions = ("none", "deflate")
    runs: dict[str, dict[str, Any]] = {}
    for size in sizes:
        for compression in compressions:
            for way in ("streamed",) + (("old",) if size in OLD_WAY_SIZES else ()):
                runs[f"{size}/{compression}/{way}"] = run_child(size, compression, way)
        if chosen or size in (QUICK_SIZES[:1] if options.quick else OWN_SIZES):
            for way in ("nodegroup", "nodegroup-held"):
                runs[f"{size}/none/{way}"] = run_child(size, "none", way)
    return result_of(runs, sizes)


def result_of(runs: dict[str, dict[str, Any]], sizes: tuple[int, ...]) -> BenchmarkResult:
    """The table of the runs, keyed size/compression/way as run() keys them."""
    columns = ["scan", "events (M)", "compression", "way", "rank 0 peak RSS MiB", "file MB", "size vs none",
               "write s (total less generation)", "last piece to file on disk s", "MB/s",
               "rank 0's own part: pieces during the scan"]
    rows = []
    for key, r in runs.items():
        size, compression, way = key.split("/")
        events = int(size) ** 2 * ELECTRONS
        plain = runs.get(f"{size}/none/{way}", r)["bytes"]
        rows.append([f"{size} x {size}", round(events / 1e6, 1), compression, way, round(r["peak_kib"] / 1024, 1),
                     round(r["bytes"] / 1e6, 1), round(r["bytes"] / plain, 3), round(r["write_s"], 2),
                     round(r["final_s"], 2), round(r["bytes"] / 1e6 / max(r["write_s"], 1e-9), 0),
                     r.get("own_pieces", "-")])
    largest = max(sizes)
    peak = max(r["peak_kib"] for k, r in runs.items() if k.startswith(f"{largest}/") and k.endswith("/streamed")) / 1024
    targets = [Target(f"rank 0 peak RSS, {largest} x {largest} scan at {ELECTRONS} electrons per frame",
                      f"< {TARGET_MIB:.0f} MiB", f"{peak:.0f} MiB", peak < TARGET_MIB)]
    own = [int(k.split("/")[0]) for k in runs if k.endswith("/nodegroup")]
    if own:
        biggest = max(own)
        mine = runs[f"{biggest}/none/nodegroup"]["peak_kib"] / 1024
        targets.append(Target(f"rank 0 peak RSS, its NodeGroup counting a quarter, {biggest} x {biggest} at {ELECTRONS} "
                              "e/frame", f"< {TARGET_MIB:.0f} MiB", f"{mine:.0f} MiB", mine < TARGET_MIB))
    notes = [
        f"One fresh process per row (VmHWM from /proc/self/status at the end); a job of {GROUPS} NodeGroups, each "
        f"part sent in pieces of at most {PIECE_EVENTS:,} events ([nodegroup] gather_piece_events) through "
        f"pickle; frames {FRAME[0]} x {FRAME[1]}, {ELECTRONS} electrons per frame, synthetic.",
        "nodegroup: rank 0's own NodeGroup (C++, 2 counting threads, settings_from of configs/local.toml, thresholds "
        "fixed) counts part 0 from raw frames a sender thread of the process pushes to its ports, handing its counted "
        "frames out in pieces while the scan runs (RunningParts); nodegroup-held: the same NodeGroup holding its part "
        "until the scan ends (drain_events 0), as before. Their write s includes the counting; the peak includes the "
        "NodeGroup's pool, its sockets' queues and the sender's 16 raw frames.",
        "write s: the run's time less the time spent generating events (the streamed way writes as the pieces come); "
        "last piece to file on disk: from the last piece added to the file under its final name (metadata, the "
        "link). MB/s: file bytes over write s. The old way: the whole scan as a per-position list, then "
        "write_counted_scan (gather.py before rank 0 wrote each part as it came).",
        "The file holds the events twice: stempy's vlen /electron_events/frames and the NeXus /entry/events/event_id "
        "(the NeXus NXevent_data the field reads), so about 8 bytes per event. deflate reaches only "
        "event_id: HDF5 keeps vlen data in its global heap, which no filter reaches (only the frames' "
        "16-byte heap references shrink). 'last piece to file on disk' is mostly the NeXus event_id, copied "
        "from the frames dataset once the scan is whole.",
    ]
    return BenchmarkResult(columns=columns, rows=rows, notes=notes, targets=targets,
                           details={"runs": runs, "sizes": list(sizes)})


def plot(result: BenchmarkResult, path: Path) -> None:
    """Peak RSS and write time against the scan's events, one line per compression and way."""
    from bench.plots import figure

    with figure(path, 2, "counted-file write: rank 0 peak RSS and write time") as axes:
        lines: dict[str, list[tuple[float, float, float]]] = {}
        for key, r in result.details["runs"].items():
            size, compression, way = key.split("/")
            lines.setdefault(f"{way}, {compression}", []).append(
                (int(size) ** 2 * ELECTRONS / 1e6, r["peak_kib"] / 1024, r["write_s"]))
        for label, points in lines.items():
            points.sort()
            axes[0].plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
            axes[1].plot([p[0] for p in points], [p[2] for p in points], marker="o", label=label)
        for panel, unit in zip(axes, ("MiB", "s")):
            panel.set_xscale("log")
            panel.set_xlabel("events (millions)")
            panel.set_ylabel(unit)
            panel.legend()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    size_arg, compression_arg, way_arg, directory_arg = sys.argv[1:5]
    print(json.dumps(child(int(size_arg), compression_arg, way_arg, directory_arg)))
