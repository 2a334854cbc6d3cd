"""A 4D Camera receiver as the detector's own software streams (protocol/SPEC.md, "Two dialects"),
written from the field list alone with pyzmq and msgpack, not through sectorflow's codec: each
receiver thread pushes two-part messages, ``[scan_number, frame_number, num_frames_this_thread,
nSTEM_positions_per_row_m1, nSTEM_rows_m1, STEM_x_position_in_row, STEM_row_in_scan, thread_id,
module]`` and the module's pixels, to its receiver's aggregator port; no info message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgpack
import numpy as np
import zmq


def native_header(scan: int, frame: int, frames_this_thread: int, scan_x: int, scan_y: int, x: int, y: int,
                  thread: int, module: int) -> bytes:
    return msgpack.packb([scan, frame, frames_this_thread, scan_x - 1, scan_y - 1, x, y, thread, module])


@dataclass(frozen=True)
class NativeScan:
    """A scan as a detector numbers it: frame ``first_frame + k`` is taken at position ``order[k]``."""

    scan: int
    scan_x: int
    scan_y: int
    first_frame: int
    order: list[int]  # position of the k-th frame

    @classmethod
    def shuffled(cls, scan: int, scan_x: int, scan_y: int, first_frame: int, seed: int) -> NativeScan:
        order = np.random.default_rng(seed).permutation(scan_x * scan_y).tolist()
        return cls(scan, scan_x, scan_y, first_frame, order)

    def thread_frames(self, thread: int, threads: int) -> list[int]:
        """The k of the frames receiver thread ``thread`` of ``threads`` sends, in order."""
        return [k for k in range(len(self.order)) if (self.first_frame + k) % threads == thread]


def stream_native(endpoints: list[str], scan: NativeScan, threads: int,
                  frame_of: Callable[[int], np.ndarray], sector_rows: int,
                  skip: Callable[[int, int], bool] = lambda k, module: False, announce_skipped: bool = False) -> int:
    """Streams ``scan`` from every receiver (module m to ``endpoints[m]``), ``threads`` threads each,
    one PUSH socket per thread; ``frame_of(position)`` gives the pixels. A sector for which
    ``skip(k, module)`` is true is not sent; its thread's num_frames_this_thread counts it only with
    ``announce_skipped`` (the detector lost it after the count was known). Returns the messages sent."""
    sent = 0
    with zmq.Context() as context:
        sockets = []
        for endpoint in endpoints:
            for _ in range(threads):
                push = context.socket(zmq.PUSH)
                push.setsockopt(zmq.LINGER, 10000)
                push.connect(endpoint)
                sockets.append(push)
        try:
            plan = {(m, t): [k for k in scan.thread_frames(t, threads) if announce_skipped or not skip(k, m)]
                    for m in range(len(endpoints)) for t in range(threads)}
            for k in range(len(scan.order)):
                position = scan.order[k]
                frame = frame_of(position)
                x, y = position % scan.scan_x, position // scan.scan_x
                for m in range(len(endpoints)):
                    t = (scan.first_frame + k) % threads
                    if skip(k, m):
                        continue
                    pixels = np.ascontiguousarray(frame[m * sector_rows:(m + 1) * sector_rows])
                    header = native_header(scan.scan, scan.first_frame + k, len(plan[(m, t)]), scan.scan_x,
                                           scan.scan_y, x, y, t, m)
                    sockets[m * threads + t].send_multipart([header, pixels.tobytes()])
                    sent += 1
        finally:
            for push in sockets:
                push.close()
    return sent
