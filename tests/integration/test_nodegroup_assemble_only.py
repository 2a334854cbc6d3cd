"""A NodeGroup with counting switched off (``NodeGroupSettings(count=False)``, what the transport
benchmark measures): fed over tcp on 127.0.0.1 like the aggregator feeds it, it assembles every
frame and hands over the scan with every position, no events and no thresholds."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import zmq

from sectorflow.consumer.nodegroup import NodeGroup, settings_from
from sectorflow.protocol import DataHeader, InfoMessage, encode_header, encode_info

SMALL = {"detector": {"frame_rows": 16, "frame_cols": 16, "sector_rows": 4, "sector_cols": 16},
         "nodegroup": {"pool_frames": 8}}
UID = "ng-assemble-only"
RESULT_S = 30.0


def feed(group: NodeGroup, open_push: Callable[[str], zmq.Socket], scan_x: int, scan_y: int,
         sector_bytes: int) -> None:
    """Send one scan as the aggregator would: per thread r, its info message, then sector r of every frame."""
    for r, port in enumerate(group.ports):
        push = open_push(f"tcp://127.0.0.1:{port}")
        frames = scan_x * scan_y
        push.send(encode_info(InfoMessage(scan_number=5, receiver=r, thread_id=0, scan_x=scan_x, scan_y=scan_y,
                                          routing=[UID], counts={UID: frames})))
        pixels = np.full(sector_bytes // 2, 1000, dtype=np.uint16)  # would be electrons, were they counted
        for f in range(frames):
            header = DataHeader(scan_number=5, frame_number=f, sector=r, scan_x=scan_x, scan_y=scan_y,
                                position_x=f % scan_x, position_y=f // scan_x)
            push.send_multipart([encode_header(header), pixels])


def test_counting_off_assembles_every_frame_and_records_no_events(make_config, open_push) -> None:
    config, _ = make_config(**SMALL)
    settings = settings_from(config, UID, counting_threads=2, count=False)
    assert settings.count is False
    group = NodeGroup(settings)
    try:
        feed(group, open_push, 4, 3, config.detector.sector_bytes)
        result = group.wait_scan(RESULT_S)
    finally:
        group.stop()
    assert result is not None, f"no scan finished within {RESULT_S} s"
    assert sorted(result.positions.tolist()) == list(range(12))
    assert result.events.size == 0
    assert result.offsets.tolist() == [0] * 13
    assert (result.frames_complete, result.frames_incomplete, result.uncounted_frames) == (12, 0, 0)
    assert list(result.received) == [12] * 4 and not result.timed_out
    assert not result.thresholds_known and result.threshold_error == ""


def test_counting_is_on_unless_switched_off(make_config) -> None:
    config, _ = make_config(**SMALL)
    assert settings_from(config, UID, counting_threads=1).count is True
