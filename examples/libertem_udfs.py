"""LiberTEM-live on sectorflow's counted frames: stock UDFs (SumUDF, SumSigUDF, ApplyMasksUDF,
CoMUDF) run on every scan as it is counted, with partial results while it runs. Needs the optional
group ``libertem``, which the checkout's ``.venv`` has (``make demo`` installs every extra of
requirements.lock); elsewhere ``pip install '.[libertem]'`` in the checkout (sectorflow is not on PyPI). Run it beside a running stack and its bridge, then
acquire a scan:

    sectorflow libertem --config configs/local.toml &        # listening on 127.0.0.1:8283
    python examples/libertem_udfs.py --port 8283 --scans 1 &
    sectorflow acquire --scan-shape 64x64 --wait

It prints a line per partial result (positions done, electrons so far) and one per scan at its end,
a partial result every --frames-per-partition positions (LiberTEM-live's own default is 4,096: at
the 4D Camera's 87,000 frames/s that is every 47 ms, at a demo's 1,000 frames/s every 4 s; the client
chooses it, the bridge cannot: libertem_bridge/SPEC.md, "Partial results"),
and with --out saves the last scan's results (``sum``: the summed pattern; ``intensity``: events
per position; ``masked``: electrons in a disk of --mask-radius around the frame centre per position;
``mask``: that disk; ``ring``, ``ring_mask``: the same for a ring of --ring-radii; ``com_y``, ``com_x``:
LiberTEM's centre of mass about the frame centre) as an .npz file. The masks are LiberTEM's
(``libertem.masks``), whose pixel convention sectorflow's virtual detectors follow (analysis/SPEC.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


# The asi_tpx3 connection's shared-memory slot is bytes_per_chunk x CHUNKS_PER_STACK (24, its default):
# each chunk the bridge sends must fit one (libertem_bridge/SPEC.md).
CHUNKS_PER_STACK = 24
# A partial result every this many positions: a 256-wide scan's row (LiberTEM-live's default, 4,096,
# is every 16 rows; each partition costs LiberTEM a task and a merge of every UDF's buffers).
FRAMES_PER_PARTITION = 256


def run(host: str, port: int, scans: int, timeout_s: float, workers: int, mask_radius: float | None,
        ring_radii: tuple[float, float] | None, out: Path | None, chunk_bytes: int, frames_per_partition: int) -> int:
    # Imported here: the optional group's packages are only needed to run this, not to read it.
    from libertem import masks
    from libertem.executor.pipelined import PipelinedExecutor
    from libertem.udf.com import CoMUDF
    from libertem.udf.masks import ApplyMasksUDF
    from libertem.udf.sum import SumUDF
    from libertem.udf.sumsigudf import SumSigUDF
    from libertem_live.api import LiveContext

    executor = PipelinedExecutor(spec=PipelinedExecutor.make_spec(cpus=range(workers), cudas=[]))
    with LiveContext(executor=executor) as ctx:
        bytes_per_chunk = max(16 << 10, -(-chunk_bytes // CHUNKS_PER_STACK))
        with ctx.make_connection("asi_tpx3").open(data_host=host, data_port=port, bytes_per_chunk=bytes_per_chunk,
                                                  chunks_per_stack=CHUNKS_PER_STACK) as conn:
            for _ in range(scans):
                pending = conn.wait_for_acquisition(timeout_s)
                if pending is None:
                    print(f"no acquisition arrived from {host}:{port} within {timeout_s:g} s", file=sys.stderr)
                    return 1
                aq = ctx.make_acquisition(conn=conn, pending_aq=pending, frames_per_partition=frames_per_partition)
                rows, cols = aq.shape.sig
                radius = mask_radius if mask_radius is not None else min(rows, cols) / 4
                disk = masks.circular(cols / 2, rows / 2, cols, rows, radius)
                inner, outer = ring_radii if ring_radii is not None else (radius, 2 * radius)
                ring = masks.ring(cols / 2, rows / 2, cols, rows, outer, inner)
                udfs = [SumUDF(), SumSigUDF(), ApplyMasksUDF(mask_factories=[lambda: disk, lambda: ring]),
                        CoMUDF.with_params(cy=rows / 2, cx=cols / 2)]
                result = None
                for result in ctx.run_udf_iter(dataset=aq, udf=udfs):
                    done = int(result.damage.data.sum())
                    electrons = float(result.buffers[0]["intensity"].data.sum())
                    print(f"partial: {done} of {aq.shape.nav.size} positions, {electrons:.0f} electrons", flush=True)
                assert result is not None
                final = result.buffers
                sums, sumsig, masked, com = final[0]["intensity"].data, final[1]["intensity"].data, \
                    final[2]["intensity"].data, final[3]
                print(f"scan done: {aq.shape.nav.size} positions, {sumsig.sum():.0f} electrons", flush=True)
                if out is not None:
                    np.savez(out, sum=sums, intensity=sumsig, masked=masked[..., 0], ring=masked[..., 1],
                             com_y=com["field_y"].data, com_x=com["field_x"].data, mask=disk, ring_mask=ring)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="where 'sectorflow libertem' listens")
    parser.add_argument("--port", type=int, default=8283, help="its port ([libertem] listen)")
    parser.add_argument("--scans", type=int, default=1, help="acquisitions (scans) to analyse, then stop")
    parser.add_argument("--timeout", type=float, default=600.0, help="longest wait for a scan to begin, seconds")
    parser.add_argument("--workers", type=int, default=2, help="LiberTEM worker processes (CPUs)")
    parser.add_argument("--mask-radius", type=float, default=None, help="ApplyMasksUDF's disk, pixels "
                        "(default: a quarter of the frame)")
    parser.add_argument("--ring-radii", type=float, nargs=2, default=None, metavar=("INNER", "OUTER"),
                        help="ApplyMasksUDF's ring, pixels (default: the disk's radius and twice it)")
    parser.add_argument("--out", type=Path, default=None, help="save the last scan's results here (.npz)")
    parser.add_argument("--chunk-bytes", type=int, default=384 << 10, help="the bridge's [libertem] chunk_bytes "
                        "(default 393216, the bridge's): LiberTEM's shared-memory slots are sized to hold one chunk")
    parser.add_argument("--frames-per-partition", type=int, default=FRAMES_PER_PARTITION,
                        help=f"positions per LiberTEM partition, so a partial result every that many positions "
                        f"(default {FRAMES_PER_PARTITION}; LiberTEM-live's own is 4096)")
    args = parser.parse_args()
    if args.frames_per_partition < 1:
        parser.error(f"--frames-per-partition {args.frames_per_partition}: need at least 1 position")
    return run(args.host, args.port, args.scans, args.timeout, args.workers, args.mask_radius,
               tuple(args.ring_radii) if args.ring_radii else None, args.out, args.chunk_bytes,
               args.frames_per_partition)


if __name__ == "__main__":
    sys.exit(main())
