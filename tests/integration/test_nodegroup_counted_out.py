"""A NodeGroup hands out the frames its counting threads counted while their scan runs
(``NodeGroup.take_counted``, ``NodeGroupSettings.drain_events``): fed over tcp on 127.0.0.1 like
the aggregator feeds it, a scan held open (its info messages not sent yet) gives its counted frames
out before it ends; its result then holds the frames not taken and the whole part's account, and
every frame is handed out once, with its events and virtual-image values."""

from __future__ import annotations

import numpy as np
from support import wait_until

from sectorflow.consumer.nodegroup import NodeGroup, settings_from
from sectorflow.protocol import DataHeader, InfoMessage, encode_header, encode_info

SMALL = {"detector": {"frame_rows": 16, "frame_cols": 16, "sector_rows": 4, "sector_cols": 16},
         "nodegroup": {"pool_frames": 8},
         "counting": {"background_threshold": 30.0, "xray_threshold": 5000.0}}
UID = "ng-counted-out"
SCAN, SCAN_X, SCAN_Y = 7, 8, 6
WAIT_S = 30.0


def frame(f: int) -> np.ndarray:
    """Frame f: dark (10) but 1 + f % 5 isolated bright pixels (1000 ADU): that many electrons."""
    pixels = np.full((16, 16), 10, dtype=np.uint16)
    for k in range(1 + f % 5):
        pixels[3 * k, (f + 3 * k) % 16] = 1000
    return pixels


def expected_events(f: int) -> list[int]:
    return sorted(int(i) for i in np.flatnonzero(frame(f) > 100))


def test_counted_frames_go_out_while_the_scan_runs_and_its_result_holds_the_rest(make_config, open_push) -> None:
    config, _ = make_config(**SMALL)
    settings = settings_from(config, UID, counting_threads=2)
    settings.drain_events = 4  # a counting thread hands out its frames once they hold 4 events
    group = NodeGroup(settings)
    frames = SCAN_X * SCAN_Y
    try:
        sockets = [open_push(f"tcp://127.0.0.1:{port}") for port in group.ports]
        for f in range(frames):
            for r, push in enumerate(sockets):
                header = DataHeader(scan_number=SCAN, frame_number=f, sector=r, scan_x=SCAN_X, scan_y=SCAN_Y,
                                    position_x=f % SCAN_X, position_y=f // SCAN_X)
                push.send_multipart([encode_header(header), frame(f)[4 * r:4 * (r + 1)].tobytes()])
        taken: list = []

        def most_taken() -> bool:  # the scan cannot end: no info message came
            taken.extend(group.take_counted(1))
            return sum(len(t.positions) for t in taken) >= frames - 2 * 4  # all but what two threads hold
        wait_until(most_taken, WAIT_S, "the frames counted to be handed out while the scan runs")
        assert group.wait_scan(0.0) is None  # still running
        for r, push in enumerate(sockets):
            push.send(encode_info(InfoMessage(scan_number=SCAN, receiver=r, thread_id=0, scan_x=SCAN_X,
                                              scan_y=SCAN_Y, routing=[UID], counts={UID: frames})))
        result = group.wait_scan(WAIT_S)
        assert result is not None
        assert group.take_counted(0) == []  # what was not taken came with the result
    finally:
        group.stop()
    events: dict[int, list[int]] = {}
    for part in [*taken, result]:
        assert part.scan_number == SCAN and (part.scan_x, part.scan_y) == (SCAN_X, SCAN_Y)
        offsets = part.offsets.tolist()
        assert len(offsets) == len(part.positions) + 1 and part.imaged == len(part.positions) == len(part.images["com_x"])
        assert all(len(v) == len(part.positions) for v in part.images.values())
        for i, p in enumerate(part.positions.tolist()):
            assert p not in events  # every frame handed out once
            events[p] = part.events[offsets[i]:offsets[i + 1]].tolist()
    assert events == {f: expected_events(f) for f in range(frames)}
    assert all(part.frames_complete == 0 and len(part.received) == 0 for part in taken)  # frames only, no account
    assert (result.frames_complete, result.frames_incomplete) == (frames, 0)  # the whole part's account
    assert list(result.received) == [frames] * 4 and not result.timed_out
    # The summed diffraction pattern of every piece is the scan's.
    diffraction = sum(np.asarray(p.diffraction, dtype=np.int64) for p in [*taken, result] if len(p.diffraction))
    assert int(diffraction.sum()) == sum(len(e) for e in events.values())
