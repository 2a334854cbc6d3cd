"""The producer side of the native stream: a receiver that speaks the 4D Camera's own stream (``wire =
"native"``) and frame numbers that carry the detector's counter (``first_frame``), read off the
wire by a plain pyzmq PULL socket and plain ``msgpack``, not by the project's codecs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from producer_support import (
    SMALL_DETECTOR,
    START_S,
    digest,
    run_threads,
    small_receivers,
    start_kvstore,
    upstream_for,  # noqa: F401  (fixture)
)
from support import wait_until

from sectorflow.kvstore import Client
from sectorflow.producer import Producer, ProducerError, ReplaySource, ScanRequest, producer_options, simulator_source
from sectorflow.protocol import (
    AcquireRequest,
    DataHeader,
    ProducerScanRecord,
    RawFileReader,
    RawFileWriter,
    RelayScanRecord,
    find_raw_files,
    scan_producer_key,
    scan_relay_key,
)
from sectorflow.simulator import simulator_from_config

SCAN_X, SCAN_Y = 5, 3
N_FRAMES = SCAN_X * SCAN_Y


def native_receivers(threads: int) -> list[dict]:
    return [{**receiver, "wire": "native"} for receiver in small_receivers(threads)]


def test_native_wire_sends_the_detectors_own_headers_and_no_info_message(make_config, upstream_for) -> None:
    # Some sectors are lost upstream, so the threads of a receiver announce different counts.
    config, _ = make_config(detector=SMALL_DETECTOR, receivers=native_receivers(2),
                            simulator={"dropped_fraction": 0.2})
    upstream = upstream_for(config)
    sim = simulator_from_config(config)
    scan, first = 11, 70_001
    producers = [Producer(producer_options(config, r, t), None) for r in range(4) for t in range(2)]
    assert {p.options.wire for p in producers} == {"native"}
    request = ScanRequest(scan_number=scan, scan_x=SCAN_X, scan_y=SCAN_Y, routing=["ng-a", "ng-b"], first_frame=first)
    results = run_threads([
        lambda p=p: p.run_scan(request, simulator_source(sim, scan, p.options.receiver, N_FRAMES, 2,
                                                          p.options.thread_id))
        for p in producers
    ])
    expected = {(p, r) for p in range(N_FRAMES) for r in range(4) if not sim.dropped(scan, p, r)}
    assert len(expected) < 4 * N_FRAMES, "the simulator drops some sectors in this test"
    upstream.collect(0, len(expected), "every data message")
    assert upstream.drain() == 0 and len(upstream.data) == len(expected)
    assert upstream.infos == [], "a native receiver sends no info message"

    per_thread = Counter((r, header[7]) for r, header, _ in upstream.data)
    seen = set()
    for r, header, payload in upstream.data:
        assert len(header) == 9 and all(isinstance(field, int) for field in header), header
        scan_number, frame, frames_this_thread, per_row_m1, rows_m1, x, y, thread, module = header
        position = y * SCAN_X + x
        assert (scan_number, per_row_m1, rows_m1, module) == (scan, SCAN_X - 1, SCAN_Y - 1, r)
        assert frame == first + position, "the detector's counter, not the position"
        assert thread == position % 2, "threads split by position"
        assert frames_this_thread == per_thread[(r, thread)], "what the thread sends for the scan"
        assert digest(payload) == digest(sim.sector(scan, position, r).tobytes())
        seen.add((position, r))
    assert seen == expected
    assert {(p.options.receiver, p.options.thread_id): result.messages
            for p, result in zip(producers, results)} == dict(per_thread)
    # The decision and the scan record still route and count by the frame number.
    for p, result in zip(producers, results):
        owned = [pos for pos in range(p.options.thread_id, N_FRAMES, 2)
                 if not sim.dropped(scan, pos, p.options.receiver)]
        counts = Counter(["ng-a", "ng-b"][(first + pos) % 2] for pos in owned)
        assert dict(result.decision.counts) == {uid: counts[uid] for uid in ("ng-a", "ng-b")}
        assert p.record().counts == result.decision.counts and p.record().sent == len(owned)


def test_daemon_streams_natively_from_first_frame_writes_it_and_replays_the_same_frames(
    make_config, processes, upstream_for
) -> None:
    first = 1_000_000
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=native_receivers(2),
                           simulator={"first_frame": first})
    config, path = server.config, server.path
    upstream = upstream_for(config)
    daemon = processes.sectorflow("producer", "--config", str(path), "--receiver", "1", name="producer1")
    sim = simulator_from_config(config)
    with Client.from_config(config, name="test") as client:
        wait_until(lambda: len(client.statuses("producer")) == 2, START_S, "2 producer threads to report idle")

        def request(scan: int, **fields: object) -> None:
            client.set_once("acquire/request", AcquireRequest(scan_number=scan, scan_x=SCAN_X, scan_y=SCAN_Y,
                                                              **fields).encode(), 0.0)

        def finished(scan: int) -> list[ProducerScanRecord]:
            keys = [scan_producer_key(scan, 1, t) for t in range(2)]

            def current() -> list[ProducerScanRecord]:
                return [ProducerScanRecord.decode(raw) for raw in map(client.get, keys) if raw is not None]

            wait_until(lambda: [r.state for r in current()] == ["finished"] * 2, START_S, f"scan {scan}'s records")
            return current()

        # Scan 1 streams: native headers, frame numbers from [simulator] first_frame.
        request(1, routing=["ng-a"])
        upstream.collect(0, N_FRAMES, "scan 1's messages")
        assert upstream.infos == []
        streamed = {h[1]: (h[5] + h[6] * SCAN_X, h[2], h[7]) for _, h, _ in upstream.data}
        assert sorted(streamed) == [first + p for p in range(N_FRAMES)]
        assert all(frame == first + p and count == len(range(t, N_FRAMES, 2))
                   for frame, (p, count, t) in streamed.items())
        assert [r.sent for r in finished(1)] == [8, 7]
        upstream.clear()

        # Scan 2 goes to disk: its records carry the detector's counter, placed by their scan_pos.
        request(2, routing=[])
        assert [r.spilled for r in finished(2)] == [8, 7]
        on_disk = {}
        for file in find_raw_files(config.producer.fallback_dir, 2):
            for header, pixels in RawFileReader(file, config.geometry()):
                assert header.frame_number == first + header.position_y * SCAN_X + header.position_x
                on_disk[header.frame_number] = digest(pixels.tobytes())
        assert on_disk == {first + p: digest(sim.sector(2, p, 1).tobytes()) for p in range(N_FRAMES)}

        # Replaying scan 2 sends the frame numbers its files carry, in the receiver's dialect.
        request(2, routing=["ng-a"], source="replay")
        upstream.collect(0, N_FRAMES, "the replayed scan 2")
        assert upstream.infos == [] and all(len(h) == 9 for _, h, _ in upstream.data)
        assert {h[1]: digest(payload) for _, h, payload in upstream.data} == on_disk
        assert [r.sent for r in finished(2)] == [8, 7]
    assert processes.stop(daemon) == 0
    log = processes.output(daemon)
    assert "Traceback" not in log
    assert f"streams 8 messages (native wire, frames from {first}) to 1 NodeGroups" in log, log


def write_records(directory: Path, scan: int, thread: int, frames: dict[int, int], geometry) -> Path:
    """A raw file of sector 0 holding position p under frame number frames[p]."""
    pixels = np.zeros((geometry.sector_rows, geometry.sector_cols), dtype=np.uint16)
    with RawFileWriter(directory, scan, 0, thread, geometry) as writer:
        for position, frame in frames.items():
            writer.write(DataHeader(scan_number=scan, frame_number=frame, sector=0, scan_x=SCAN_X, scan_y=SCAN_Y,
                                    position_x=position % SCAN_X, position_y=position // SCAN_X,
                                    thread_id=thread), pixels)
    return Path(writer.path)


def test_replay_takes_the_files_counter_and_refuses_a_scan_whose_frame_and_position_disagree(
    make_config, tmp_path: Path
) -> None:
    config, _ = make_config(detector=SMALL_DETECTOR, receivers=small_receivers(2))
    geometry = config.geometry()
    # Two files written by two detector threads, positions interleaved: one counter offset.
    write_records(tmp_path, 1, 0, {p: 500 + p for p in range(0, N_FRAMES, 3)}, geometry)
    write_records(tmp_path, 1, 1, {p: 500 + p for p in range(N_FRAMES) if p % 3}, geometry)
    sources = [ReplaySource(tmp_path, 1, 0, SCAN_X, SCAN_Y, 2, t, geometry) for t in range(2)]
    assert [source.first_frame for source in sources] == [500, 500]
    assert [source.frames() for source in sources] == [
        [p for p in range(0, N_FRAMES, 3) if p % 2 == t] + [p for p in range(N_FRAMES) if p % 3 and p % 2 == t]
        for t in range(2)
    ], "each thread its positions, in file order"

    # One record of the second file is a frame late: the files do not say where frame f belongs.
    write_records(tmp_path, 2, 0, {p: 500 + p for p in range(0, N_FRAMES, 3)}, geometry)
    bad = write_records(tmp_path, 2, 1, {p: 500 + p + (p == 7) for p in range(N_FRAMES) if p % 3}, geometry)
    with pytest.raises(ProducerError) as refused:
        ReplaySource(tmp_path, 2, 0, SCAN_X, SCAN_Y, 2, 0, geometry)
    message = str(refused.value)
    assert "\n" not in message and str(bad) in message
    assert message.startswith(f"replay of scan 2, sector 0: {bad} record 4 has frame 508 at position 7, but the "
                              f"records of {tmp_path / 'data_scan0000000002_module0_0.data'} have frame - position "
                              "= 500"), message

    # A frame number below its position cannot come from any first frame.
    low = write_records(tmp_path, 3, 0, {4: 3}, geometry)
    with pytest.raises(ProducerError, match=rf"^replay of scan 3, sector 0: {low} record 0 has frame 3 at position "
                                            r"4, below its position; replay needs frame = first frame \+ position"):
        ReplaySource(tmp_path, 3, 0, SCAN_X, SCAN_Y, 2, 0, geometry)


def test_send_takes_the_frame_number_and_refuses_one_outside_the_scans_counter(make_config) -> None:
    config, _ = make_config(detector=SMALL_DETECTOR, receivers=small_receivers(1))
    producer = Producer(producer_options(config, 0, 0), None)
    producer.begin_scan(ScanRequest(scan_number=4, scan_x=2, scan_y=2, routing=[], first_frame=10), [0, 1, 2, 3])
    sector = np.zeros((8, 32), dtype=np.uint16)
    for frame in (9, 14):
        with pytest.raises(ProducerError, match=rf"^scan 4, frame {frame}, sector 0: frame outside the 2 x 2 scan, "
                                                r"whose frame numbers are 10 to 13$"):
            producer.send(frame, 0, sector)
    for frame in (13, 10, 12, 11):
        producer.send(frame, 0, sector)
    result = producer.end_scan()
    assert result.spilled == 4
    with RawFileReader(result.spill_file, config.geometry()) as records:
        placed = [(h.frame_number, h.position_x, h.position_y) for h, _ in records]
    assert placed == [(13, 1, 1), (10, 0, 0), (12, 0, 1), (11, 1, 0)]


def test_native_headers_announce_sectors_spilled_for_a_dead_nodegroup_routed_by_frame_number(
    make_config, processes, upstream_for
) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=native_receivers(1))
    config = server.config
    upstream = upstream_for(config)
    sim = simulator_from_config(config)
    warnings: list[str] = []
    scan, first = 33, 1001
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 0, 0, warn=warnings.append), client)
        decision = producer.begin_scan(ScanRequest(scan_number=scan, scan_x=SCAN_X, scan_y=SCAN_Y,
                                                   routing=["ng-a", "ng-b"], first_frame=first), list(range(N_FRAMES)))
        assert dict(decision.counts) == {"ng-a": 7, "ng-b": 8}, "odd frame numbers 1001..1015 go to ng-b"
        for position in range(6):
            producer.send(first + position, 0, sim.sector(scan, position, 0))
        key = scan_relay_key(scan, 0)
        dead = RelayScanRecord(thread=0, complete=False, forwarded={"ng-a": 3, "ng-b": 3}, lost={}, dead=["ng-b"],
                               updated_s=0.0)
        client.set_once(key, dead.encode(), 60.0)
        wait_until(lambda: client.get(key) is not None, START_S, "the relay record in the replica")
        for position in range(6, N_FRAMES):
            producer.send(first + position, 0, sim.sector(scan, position, 0))
        result = producer.end_scan()
    dead_frames = [1007, 1009, 1011, 1013, 1015]
    assert (result.sent, result.spilled) == (N_FRAMES - len(dead_frames), len(dead_frames))
    with RawFileReader(result.spill_file, config.geometry()) as records:
        assert [header.frame_number for header, _ in records] == dead_frames
    upstream.collect(0, result.sent, "the sectors of the live NodeGroup and those sent before")
    headers = [header for _, header, _ in upstream.data]
    assert sorted(h[1] for h in headers) == [f for f in range(first, first + N_FRAMES) if f not in dead_frames]
    # Announced at scan start, spilled ones included: the relay closes the scan after its idle time.
    assert {h[2] for h in headers} == {N_FRAMES}
    assert upstream.infos == []
    assert len(warnings) == 1 and "relay thread 0 declared NodeGroup ng-b dead" in warnings[0]


def test_daemon_records_a_scan_whose_frame_numbers_would_pass_the_counters_end(make_config, processes) -> None:
    first = 2**32 - 10
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(2),
                           simulator={"first_frame": first})
    daemon = processes.sectorflow("producer", "--config", str(server.path), "--receiver", "0", name="producer0")
    with Client.from_config(server.config, name="test") as client:
        wait_until(lambda: len(client.statuses("producer")) == 2, START_S, "2 producer threads to report idle")
        client.set_once("acquire/request", AcquireRequest(scan_number=5, scan_x=SCAN_X, scan_y=SCAN_Y,
                                                          routing=[]).encode(), 0.0)
        keys = [scan_producer_key(5, 0, t) for t in range(2)]

        def records() -> list[ProducerScanRecord]:
            return [ProducerScanRecord.decode(raw) for raw in map(client.get, keys) if raw is not None]

        wait_until(lambda: [r.state for r in records()] == ["error", "error"], START_S, "scan 5's records")
    expected = f"scan 5: first frame {first} + 15 positions - 1 exceeds the largest frame number, 2^32 - 1"
    assert [(r.error, r.owned, r.sent, r.spilled) for r in records()] == [(expected, 8, 0, 0), (expected, 7, 0, 0)]
    assert processes.stop(daemon) == 0
    log = processes.output(daemon)
    assert "Traceback" not in log and f"scan 5: not acquired: {expected}" in log
    assert not Path(server.config.producer.fallback_dir).exists(), "no raw file was begun"
