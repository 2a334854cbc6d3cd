"""The producer library through its binding: streaming with routing from the kvstore, the disk
fallback read back by stempy, replay, blocking at the high-water mark, and refused input."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import stempy.io
from producer_support import (
    SMALL_DETECTOR,
    START_S,
    digest,
    run_threads,
    small_receivers,
    stalled,
    start_kvstore,
    start_standin,
    upstream_for,  # noqa: F401  (fixture)
    wait_for_nodegroups,
)
from support import wait_until

from sectorflow.kvstore import Client
from sectorflow.protocol import ServiceStatus, status_key
from sectorflow.producer import (
    Mode,
    Producer,
    ProducerError,
    ProducerStopped,
    ReplaySource,
    ScanRequest,
    producer_options,
    simulator_source,
)
from sectorflow.protocol import RawFileReader, find_raw_files
from sectorflow.simulator import simulator_from_config

SCAN_X, SCAN_Y = 5, 3


def status_of(client: Client, name: str) -> ServiceStatus | None:
    raw = client.get(status_key("producer", name))
    return None if raw is None else ServiceStatus.decode(raw)


def test_streaming_sends_every_sector_once_with_headers_and_info_counts(
    make_config, processes, tmp_path: Path, upstream_for
) -> None:
    # The detector's counter starts at an odd number: threads split by position, routing by frame number.
    first = 1001
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(2),
                           simulator={"dropped_fraction": 0.2})
    config = server.config
    for uid in ("ng-b", "ng-a"):
        start_standin(processes, server.path, tmp_path, uid)
    upstream = upstream_for(config)
    sim = simulator_from_config(config)
    scan, n_frames = 7, SCAN_X * SCAN_Y
    with Client.from_config(config, name="test") as client:
        wait_for_nodegroups(client, ["ng-a", "ng-b"])
        producers = [Producer(producer_options(config, r, t), client) for r in range(4) for t in range(2)]
        # Routing from the replica.
        request = ScanRequest(scan_number=scan, scan_x=SCAN_X, scan_y=SCAN_Y, first_frame=first)
        results = run_threads([
            lambda p=p: p.run_scan(request, simulator_source(sim, scan, p.options.receiver, n_frames, 2,
                                                              p.options.thread_id))
            for p in producers
        ])
        expected = {(f, r) for f in range(n_frames) for r in range(4) if not sim.dropped(scan, f, r)}
        assert len(expected) < 4 * n_frames, "the simulator drops some sectors in this test"
        upstream.collect(8, len(expected), "every info and data message")
        wait_until(lambda: all(getattr(status_of(client, f"r{r}t{t}"), "state", "") == "finished"
                               for r in range(4) for t in range(2)), START_S, "every producer to finish")
        statuses = {f"r{r}t{t}": status_of(client, f"r{r}t{t}") for r in range(4) for t in range(2)}

    received = Counter((header[2] - first, header[3]) for _, header, _ in upstream.data)
    assert set(received) == expected and set(received.values()) == {1}, "every sector exactly once, none lost ones"
    sent_per_thread: Counter = Counter()
    for r, header, payload in upstream.data:
        version, scan_number, frame, sector, sx, sy, px, py, thread = header
        position = frame - first
        assert (version, scan_number, sector, sx, sy) == (2, scan, r, SCAN_X, SCAN_Y)
        assert (px, py) == (position % SCAN_X, position // SCAN_X) and thread == position % 2
        assert digest(payload) == digest(sim.sector(scan, position, sector).tobytes())
        sent_per_thread[(r, thread, ["ng-a", "ng-b"][frame % 2])] += 1  # routed by the frame number
    # Thread t's positions p (p % 2 == t) are frames f = first + p with f % 2 != t when first is odd:
    # routed by position they would go to routing[t], by frame number they go to the other NodeGroup.
    assert {uid for (_, t, uid) in sent_per_thread if t == 0} == {"ng-b"}
    assert {uid for (_, t, uid) in sent_per_thread if t == 1} == {"ng-a"}
    assert sorted((r, info["thread_id"]) for r, info in upstream.infos) == [(r, t) for r in range(4) for t in range(2)]
    for r, info in upstream.infos:
        assert info["routing"] == ["ng-a", "ng-b"] and info["receiver"] == r and info["scan_number"] == scan
        assert info["counts"] == {uid: sent_per_thread[(r, info["thread_id"], uid)] for uid in ("ng-a", "ng-b")}
    assert sum(result.messages for result in results) == len(expected)
    assert all(result.decision.mode == Mode.STREAMING for result in results)
    for name, status in statuses.items():
        assert status.extra["mode"] == "streaming" and status.extra["nodegroups"] == 2 and status.scan == scan
    assert sum(status.messages for status in statuses.values()) == len(expected)


@pytest.mark.parametrize("first", [0, 1_000_000])
def test_fallback_lands_on_disk_stempy_reads_it_and_replay_streams_it(
    make_config, processes, upstream_for, first: int
) -> None:
    # The real geometry (4 sectors of 144 x 576): stempy's version-5 reader knows no other. `first`:
    # the detector's frame counter at position 0, which the records carry and stempy looks past.
    server = start_kvstore(make_config, processes, receivers=small_receivers(2))
    config = server.config
    sim = simulator_from_config(config)
    scan, n_frames = 3, SCAN_X * SCAN_Y
    with Client.from_config(config, name="test") as client:
        assert client.wait_synced(START_S)
        producers = [Producer(producer_options(config, r, t), client) for r in range(4) for t in range(2)]
        # Nobody registered.
        request = ScanRequest(scan_number=scan, scan_x=SCAN_X, scan_y=SCAN_Y, first_frame=first)
        results = run_threads([
            lambda p=p: p.run_scan(request, simulator_source(sim, scan, p.options.receiver, n_frames, 2,
                                                              p.options.thread_id))
            for p in producers
        ])
        wait_until(lambda: all(getattr(status_of(client, f"r{r}t{t}"), "state", "") == "finished"
                               for r in range(4) for t in range(2)), START_S, "every producer to finish")
        status = status_of(client, "r2t1")
    assert status.extra["mode"] == "fallback" and status.extra["fallback_dir"] == config.producer.fallback_dir
    assert all(result.decision.mode == Mode.FALLBACK for result in results)

    files = find_raw_files(config.producer.fallback_dir, scan)
    assert [Path(f).name for f in files] == [f"data_scan{scan:010d}_module{s}_{t}.data" for s in range(4) for t in range(2)]
    frame_numbers = set()
    for path in files:
        with RawFileReader(path, config.geometry()) as records:
            frame_numbers |= {header.frame_number for header, _ in records}
    assert frame_numbers == {first + p for p in range(n_frames)}, "the records carry the detector's counter"
    reader = stempy.io.reader(files, stempy.io.FileVersion.VERSION5, backend="multi-pass")
    assert tuple(reader.scan_shape) == (SCAN_Y, SCAN_X)  # stempy: (rows, columns) of positions
    for position in range(n_frames):
        blocks = reader.read_frames(position)
        assert len(blocks) == 1
        assert np.array_equal(np.asarray(blocks[0].data).reshape(576, 576), sim.frame(scan, position)), \
            f"position {position}"

    # Replay the files into the pipeline (routing given explicitly: no kvstore needed) under the
    # frame numbers they carry.
    upstream = upstream_for(config)
    replayers = [Producer(producer_options(config, r, t), None) for r in range(4) for t in range(2)]
    sources = [ReplaySource(config.producer.fallback_dir, scan, p.options.receiver, SCAN_X, SCAN_Y, 2,
                            p.options.thread_id, config.geometry()) for p in replayers]
    assert {source.first_frame for source in sources} == {first}
    replay = ScanRequest(scan_number=scan, scan_x=SCAN_X, scan_y=SCAN_Y, routing=["ng-x"], first_frame=first)
    run_threads([lambda p=p, source=source: p.run_scan(replay, source) for p, source in zip(replayers, sources)])
    upstream.collect(8, 4 * n_frames, "the replayed scan")
    replayed = {(h[2], h[3]): digest(payload) for _, h, payload in upstream.data}
    assert len(upstream.data) == 4 * n_frames
    assert all(h[2] - first == h[6] + h[7] * SCAN_X for _, h, _ in upstream.data), "frame = first + position"
    assert replayed == {(first + p, s): digest(sim.sector(scan, p, s).tobytes())
                        for p in range(n_frames) for s in range(4)}


def blocking_upstream(make_config, processes, upstream_for) -> tuple:
    """A kvstore, and an upstream reading one message at a time, for one producer thread of 256 KiB
    sectors (one per frame): 128 frames are far more than the socket buffers and high-water marks
    hold. Returns (config, upstream, simulator)."""
    server = start_kvstore(make_config, processes, receivers=[{"host": "127.0.0.1", "threads": 1}],
                           detector={"frame_rows": 128, "frame_cols": 1024, "sector_rows": 128, "sector_cols": 1024},
                           producer={"send_hwm": 2})
    return server.config, upstream_for(server.config, rcvhwm=1), simulator_from_config(server.config)


def test_full_downstream_blocks_the_producer_and_loses_nothing(make_config, processes, upstream_for) -> None:
    config, upstream, sim = blocking_upstream(make_config, processes, upstream_for)
    scan, n_frames = 4, 128
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 0, 0), client)
        request = ScanRequest(scan_number=scan, scan_x=16, scan_y=8, routing=["ng-a"])
        outcome: list = []
        worker = threading.Thread(
            target=lambda: outcome.append(producer.run_scan(request, simulator_source(sim, scan, 0, n_frames, 1, 0))))
        worker.start()
        try:
            wait_until(stalled(lambda: producer.messages), START_S, "the producer to block at the high-water mark")
            wait_until(lambda: getattr(status_of(client, "r0t0"), "state", "") == "streaming", START_S, "its status")
            assert worker.is_alive() and producer.messages < n_frames, "blocked, not finished"
            assert status_of(client, "r0t0").state == "streaming"
            upstream.collect(1, n_frames, "every message once the reader reads")
        finally:
            upstream.drain()
            worker.join(START_S)
        assert not worker.is_alive() and outcome[0].messages == n_frames
    assert len(upstream.data) == n_frames and len(upstream.infos) == 1
    assert sorted(h[2] for _, h, _ in upstream.data) == list(range(n_frames))


def test_bad_input_is_refused_with_a_clear_error(make_config) -> None:
    config, _ = make_config(detector=SMALL_DETECTOR, receivers=small_receivers(2))
    producer = Producer(producer_options(config, 1, 0), None)
    with pytest.raises(ProducerError, match=r"scan 5, producer r1t0: scan shape 0 x 4 is empty; expected at least 1 x 1"):
        producer.begin_scan(ScanRequest(scan_number=5, scan_x=0, scan_y=4, routing=[]), [])
    with pytest.raises(ProducerError, match=r"position 1 belongs to thread 1 \(position % 2\), not to thread 0"):
        producer.begin_scan(ScanRequest(scan_number=5, scan_x=2, scan_y=2, routing=[]), [0, 1])
    with pytest.raises(ProducerError, match=r"^scan 5, producer r1t0: first frame 4294967293 \+ 4 positions - 1 "
                                            r"exceeds the largest frame number, 2\^32 - 1$"):
        producer.begin_scan(ScanRequest(scan_number=5, scan_x=2, scan_y=2, routing=[], first_frame=2**32 - 3), [0])
    decision = producer.begin_scan(ScanRequest(scan_number=5, scan_x=2, scan_y=2, routing=[]), [0, 2])
    assert decision.mode == Mode.FALLBACK and Path(decision.file).parent == Path(config.producer.fallback_dir)
    good = np.zeros((8, 32), dtype=np.uint16)
    with pytest.raises(ProducerError, match=r"scan 5, frame 0, sector 1: payload of 10 bytes, expected 512 "
                                            r"\(8 x 32 pixels of 2 bytes\)"):
        producer.send(0, 1, b"\0" * 10)
    with pytest.raises(ProducerError, match=r"scan 5, frame 0, sector 2: this producer is receiver 1 and sends "
                                            r"sector 1 only"):
        producer.send(0, 2, good)
    with pytest.raises(ProducerError, match=r"frame 1, sector 1: not announced at scan start"):
        producer.send(1, 1, good)
    producer.send(0, 1, good)
    with pytest.raises(ProducerError, match=r"frame 0, sector 1: already sent in this scan"):
        producer.send(0, 1, good)
    with pytest.raises(ProducerError, match=r"scan 5, producer r1t0: sent 1 of the 2 messages announced"):
        producer.end_scan()
    with pytest.raises(ProducerError, match=r"routing list not sorted without duplicates \('b' before 'a'\)"):
        producer.begin_scan(ScanRequest(scan_number=6, scan_x=1, scan_y=1, routing=["b", "a"]), [])
    with pytest.raises(ProducerError, match=r"no routing list in the request and no kvstore client"):
        producer.begin_scan(ScanRequest(scan_number=6, scan_x=1, scan_y=1), [])


def test_an_aborted_scan_stops_at_once_and_the_next_runs_whole(make_config, processes, upstream_for) -> None:
    # Blocked at the high-water mark, as a slow aggregator leaves it: the abort must end that wait too.
    config, upstream, sim = blocking_upstream(make_config, processes, upstream_for)
    scan, n_frames = 4, 128
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 0, 0), client)
        request = ScanRequest(scan_number=scan, scan_x=16, scan_y=8, routing=["ng-a"])
        errors: list[Exception] = []

        def run() -> None:
            try:
                producer.run_scan(request, simulator_source(sim, scan, 0, n_frames, 1, 0))
            except ProducerStopped as error:
                errors.append(error)

        worker = threading.Thread(target=run)
        worker.start()
        try:
            wait_until(stalled(lambda: producer.messages), START_S, "the producer to block at the high-water mark")
            producer.abort_scan(scan + 1)  # another scan's abort leaves this one alone
            assert worker.is_alive()
            producer.abort_scan(scan)
            wait_until(lambda: not worker.is_alive(), START_S, "the aborted scan to end")
        finally:
            worker.join(START_S)
        assert len(errors) == 1 and "the scan was aborted (sectorflow abort)" in str(errors[0])
        record = producer.record()
        assert record.state == "error" and "the scan was aborted (sectorflow abort)" in record.error
        assert record.sent == producer.messages < n_frames and record.owned == n_frames
        upstream.drain()

        # The producer is not stopped: the next scan runs whole (read as it comes, behind what the
        # aborted scan had queued).
        following = ScanRequest(scan_number=scan + 1, scan_x=4, scan_y=2, routing=["ng-a"])
        source = simulator_source(sim, scan + 1, 0, 8, 1, 0)
        worker = threading.Thread(target=lambda: producer.run_scan(following, source))
        worker.start()
        try:
            wait_until(lambda: upstream.drain() >= 0 and not worker.is_alive(), START_S, "the next scan to end")
        finally:
            worker.join(START_S)
        assert producer.record().state == "finished" and producer.record().sent == 8
