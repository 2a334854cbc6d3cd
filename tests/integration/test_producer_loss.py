"""No scan lost silently, the producer's part: every producer thread records what became
of its sectors (scans/<n>/producer/r<R>t<T>), a send blocked past send_timeout_ms spills the rest
of the scan to a raw file, sectors of a NodeGroup the relay thread declared dead are spilled while
the others stream, and a raw file that could not be completed is never passed as whole."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from producer_support import (
    SMALL_DETECTOR,
    START_S,
    Upstream,
    small_receivers,
    start_kvstore,
    upstream_for,  # noqa: F401  (fixture)
)
from support import small_disk as tmpfs
from support import wait_until

from sectorflow.kvstore import Client
from sectorflow.producer import (
    Producer,
    ProducerStopped,
    ScanRequest,
    producer_options,
    simulator_source,
)
from sectorflow.protocol import (
    RAW_HEADER_BYTES,
    ProducerScanRecord,
    RawFileError,
    RawFileReader,
    RelayScanRecord,
    ServiceStatus,
    find_raw_files,
    find_replay_files,
    raw_file_name,
    scan_producer_key,
    scan_relay_key,
    status_key,
)
from sectorflow.simulator import simulator_from_config

# One sector of 256 KiB per frame: a few fill the sockets' buffers, and a record goes to disk alone.
BIG_DETECTOR = {"frame_rows": 128, "frame_cols": 1024, "sector_rows": 128, "sector_cols": 1024, "dtype": "uint16"}
ONE_RECEIVER = [{"host": "127.0.0.1", "threads": 1}]


def record_of(client: Client, scan: int, receiver: int, thread: int, state: str) -> ProducerScanRecord:
    """The thread's scan record once the replica holds it in ``state``."""
    key = scan_producer_key(scan, receiver, thread)

    def current() -> ProducerScanRecord | None:
        raw = client.get(key)
        return None if raw is None else ProducerScanRecord.decode(raw)

    wait_until(lambda: getattr(current(), "state", None) == state, START_S, f"{key} in state {state}")
    record = current()
    assert record is not None
    return record


def frames_in(path: str | Path, geometry) -> list[int]:
    return [header.frame_number for header, _ in RawFileReader(str(path), geometry)]


def drain_data(upstream: Upstream, count: int) -> list[int]:
    """Frame numbers of the data messages upstream, once ``count`` have come."""
    upstream.collect(0, count, f"{count} data messages")
    return [header[2] for _, header, _ in upstream.data]


def test_streaming_scan_is_recorded_at_start_and_end(make_config, processes, upstream_for) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(2),
                           simulator={"dropped_fraction": 0.3})
    config = server.config
    upstream = upstream_for(config)
    sim = simulator_from_config(config)
    scan, scan_x, scan_y = 11, 5, 3
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 1, 0), client)
        source = simulator_source(sim, scan, 1, scan_x * scan_y, 2, 0)
        frames = source.frames()
        decision = producer.begin_scan(ScanRequest(scan_number=scan, scan_x=scan_x, scan_y=scan_y,
                                                   routing=["ng-a", "ng-b"]), frames)
        upstream.collect(1, 0, "the info message")
        begun = record_of(client, scan, 1, 0, "streaming")
        _, info = upstream.infos[0]
        # What a restarted aggregator recovers the scan from: the info message's routing and counts.
        assert (begun.receiver, begun.thread) == (1, 0)
        assert begun.routing == info["routing"] == ["ng-a", "ng-b"]
        assert begun.counts == info["counts"] == dict(decision.counts)
        assert begun.owned == 8  # frames 0, 2, ..., 14
        assert begun.lost_upstream == 8 - len(frames) > 0
        assert (begun.sent, begun.spilled, begun.spill_file, begun.error) == (0, 0, "", "")

        result = producer.stream(source, frames)
        done = record_of(client, scan, 1, 0, "finished")
        assert (result.sent, result.spilled, result.spill_file) == (len(frames), 0, "")
        assert (done.sent, done.spilled, done.partial) == (len(frames), 0, False)
        assert done.owned == done.lost_upstream + done.sent and done.unaccounted == 0
    assert sorted(drain_data(upstream, len(frames))) == frames
    assert not Path(config.producer.fallback_dir).exists(), "nothing spilled"


def test_fallback_scan_is_recorded_with_its_whole_raw_file(make_config, processes) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1))
    config = server.config
    sim = simulator_from_config(config)
    scan = 12
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 2, 0), client)
        result = producer.run_scan(ScanRequest(scan_number=scan, scan_x=4, scan_y=3, routing=[]),
                                   simulator_source(sim, scan, 2, 12, 1, 0))
        done = record_of(client, scan, 2, 0, "finished")
    final = Path(config.producer.fallback_dir) / raw_file_name(scan, 2, 0)
    assert (result.sent, result.spilled, result.spill_file) == (0, 12, str(final))
    assert (done.sent, done.spilled, done.spill_file, done.partial, done.routing) == (0, 12, str(final), False, [])
    assert frames_in(final, config.geometry()) == list(range(12))
    assert sorted(os.listdir(final.parent)) == [final.name], "no .writing or .partial left beside it"


def test_send_blocked_past_the_timeout_spills_the_rest_of_the_scan(make_config, processes, upstream_for) -> None:
    server = start_kvstore(make_config, processes, detector=BIG_DETECTOR, receivers=ONE_RECEIVER,
                           producer={"send_hwm": 2, "send_timeout_ms": 300})
    config = server.config
    upstream = upstream_for(config, rcvhwm=1)  # bound, and read by nobody until the end
    sim = simulator_from_config(config)
    warnings: list[str] = []
    first, second, n_frames = 21, 22, 64
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 0, 0, warn=warnings.append), client)
        result = producer.run_scan(ScanRequest(scan_number=first, scan_x=8, scan_y=8, routing=["ng-a"]),
                                   simulator_source(sim, first, 0, n_frames, 1, 0))
        assert result.sent > 0 and result.spilled > 0 and result.sent + result.spilled == n_frames
        assert len(warnings) == 1 and "took nothing for 300 ms (producer.send_timeout_ms)" in warnings[0]
        assert f"spilling the remaining {result.spilled} sectors of the scan to {result.spill_file}" in warnings[0]
        done = record_of(client, first, 0, 0, "finished")
        assert (done.sent, done.spilled, done.spill_file, done.partial) == (
            result.sent, result.spilled, result.spill_file, False)

        # The pipe is still full: the next scan's info message cannot leave, so all of it is spilled.
        again = producer.run_scan(ScanRequest(scan_number=second, scan_x=8, scan_y=8, routing=["ng-a"]),
                                  simulator_source(sim, second, 0, n_frames, 1, 0))
        assert (again.sent, again.spilled) == (0, n_frames)
        assert len(warnings) == 2 and "took no info message for 300 ms" in warnings[1]
        assert record_of(client, second, 0, 0, "finished").spilled == n_frames

        # Nothing is both sent and spilled, nothing is neither: what was queued still arrives.
        sent = drain_data(upstream, result.sent)
        spilled = frames_in(result.spill_file, config.geometry())
        assert len(sent) == result.sent and len(spilled) == result.spilled
        assert sorted(sent + spilled) == list(range(n_frames))
        assert spilled == list(range(n_frames - result.spilled, n_frames)), "spilling is for the rest of the scan"
        assert frames_in(again.spill_file, config.geometry()) == list(range(n_frames))
        assert [info["scan_number"] for _, info in upstream.infos] == [first]


def test_sectors_of_a_nodegroup_declared_dead_are_spilled_while_the_others_stream(
    make_config, processes, upstream_for
) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1))
    config = server.config
    upstream = upstream_for(config)
    sim = simulator_from_config(config)
    warnings: list[str] = []
    scan, n_frames = 31, 15
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 0, 0, warn=warnings.append), client)
        producer.begin_scan(ScanRequest(scan_number=scan, scan_x=5, scan_y=3, routing=["ng-a", "ng-b"]),
                            list(range(n_frames)))
        for frame in range(6):
            producer.send(frame, 0, sim.sector(scan, frame, 0))
        # Relay thread 0 declares ng-b (odd frames) dead for this scan.
        key = scan_relay_key(scan, 0)
        dead = RelayScanRecord(thread=0, complete=False, forwarded={"ng-a": 3, "ng-b": 3}, lost={}, dead=["ng-b"],
                               updated_s=0.0)
        client.set_once(key, dead.encode(), 60.0)
        wait_until(lambda: client.get(key) is not None, START_S, "the relay record in the replica")
        for frame in range(6, n_frames):
            producer.send(frame, 0, sim.sector(scan, frame, 0))
        result = producer.end_scan()
        done = record_of(client, scan, 0, 0, "finished")
    dead_frames = [7, 9, 11, 13]
    assert (result.sent, result.spilled) == (n_frames - len(dead_frames), len(dead_frames))
    assert (done.sent, done.spilled, done.spill_file) == (result.sent, result.spilled, result.spill_file)
    assert done.counts == {"ng-a": 8, "ng-b": 7}, "the counts stay those of the info message"
    assert frames_in(result.spill_file, config.geometry()) == dead_frames
    assert sorted(drain_data(upstream, result.sent)) == [f for f in range(n_frames) if f not in dead_frames]
    assert len(warnings) == 1 and "relay thread 0 declared NodeGroup ng-b dead" in warnings[0]


def test_a_relay_record_that_does_not_decode_is_counted_and_streaming_goes_on(
    make_config, processes, upstream_for
) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1))
    config = server.config
    upstream = upstream_for(config)
    sim = simulator_from_config(config)
    warnings: list[str] = []
    scan, n_frames = 32, 6
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 0, 0, warn=warnings.append), client)
        producer.begin_scan(ScanRequest(scan_number=scan, scan_x=3, scan_y=2, routing=["ng-a", "ng-b"]),
                            list(range(n_frames)))
        key = scan_relay_key(scan, 0)
        client.set_once(key, b"\x81\xa4dead\x01", 60.0)  # valid msgpack, not a relay record
        wait_until(lambda: client.get(key) is not None, START_S, "the bad relay record in the replica")
        for frame in range(n_frames):
            producer.send(frame, 0, sim.sector(scan, frame, 0))
        result = producer.end_scan()

        def finished() -> ServiceStatus | None:
            raw = client.get(status_key("producer", "r0t0"))
            status = None if raw is None else ServiceStatus.decode(raw)
            return status if status is not None and (status.scan, status.state) == (scan, "finished") else None

        status = wait_until(finished, START_S, "the finished status")
    assert (result.sent, result.spilled) == (n_frames, 0)
    assert sorted(drain_data(upstream, n_frames)) == list(range(n_frames))
    assert status.extra["bad_records"] == 1
    assert len(warnings) == 1 and f"skipped {key}, which does not decode: RelayScanRecord" in warnings[0]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted for the test."""
    with tmpfs(tmp_path / "small-disk", "1m") as disk:
        yield disk.path


def test_a_full_disk_leaves_a_partial_file_and_an_error_record(make_config, processes, small_disk: Path) -> None:
    server = start_kvstore(make_config, processes, detector=BIG_DETECTOR, receivers=ONE_RECEIVER,
                           producer={"fallback_dir": str(small_disk)})
    config = server.config
    sim = simulator_from_config(config)
    scan = 41
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 0, 0), client)
        with pytest.raises(RawFileError, match=r"No space left on device"):
            producer.run_scan(ScanRequest(scan_number=scan, scan_x=4, scan_y=4, routing=[]),
                              simulator_source(sim, scan, 0, 16, 1, 0))
        failed = record_of(client, scan, 0, 0, "error")
    final = small_disk / raw_file_name(scan, 0, 0)
    partial = Path(str(final) + ".partial")
    record_bytes = RAW_HEADER_BYTES + config.geometry().sector_bytes
    assert "No space left on device" in failed.error
    assert not final.exists() and partial.exists()
    assert sorted(os.listdir(small_disk)) == [partial.name]
    assert (failed.spill_file, failed.partial) == (str(partial), True)
    assert failed.spilled == partial.stat().st_size // record_bytes > 0
    assert failed.sent == 0 and failed.unaccounted == 16 - failed.spilled


def test_a_stopped_fallback_scan_leaves_a_partial_file(make_config, processes) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1))
    config = server.config
    scan = 51
    sector = np.zeros((8, 32), dtype=np.uint16)
    with Client.from_config(config, name="test") as client:
        producer = Producer(producer_options(config, 0, 0), client)
        producer.begin_scan(ScanRequest(scan_number=scan, scan_x=2, scan_y=2, routing=[]), [0, 1, 2, 3])
        producer.send(0, 0, sector)
        producer.send(1, 0, sector)
        producer.stop()
        with pytest.raises(ProducerStopped, match=r"scan 51, frame 2, sector 0: the producer was stopped"):
            producer.send(2, 0, sector)
        stopped = record_of(client, scan, 0, 0, "error")
    partial = Path(config.producer.fallback_dir) / (raw_file_name(scan, 0, 0) + ".partial")
    assert (stopped.spilled, stopped.spill_file, stopped.partial) == (2, str(partial), True)
    assert "stopped" in stopped.error
    assert os.listdir(partial.parent) == [partial.name]
    assert not find_raw_files(config.producer.fallback_dir, scan), "stempy's pattern never takes a partial file"
    # Its whole records are the sectors counted spilled: a replay reads exactly those.
    assert find_replay_files(config.producer.fallback_dir, scan) == [str(partial)]
    # A write cut short leaves a piece of a record after the whole ones: no sector, not an error.
    with partial.open("ab") as file:
        file.write(b"x" * 5)
    with RawFileReader(str(partial), config.geometry()) as reader:
        assert reader.partial
        assert [(h.position_x, h.position_y) for h, _ in reader] == [(0, 0), (1, 0)]


def test_a_daemon_marks_partial_the_raw_files_a_killed_one_left(make_config, processes) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1))
    raw = Path(server.config.producer.fallback_dir)
    raw.mkdir(parents=True, exist_ok=True)
    mine = raw / (raw_file_name(3, 0, 0) + ".writing")
    others = raw / (raw_file_name(3, 1, 0) + ".writing")
    mine.write_bytes(b"x" * RAW_HEADER_BYTES)
    others.write_bytes(b"y")
    daemon = processes.sectorflow("producer", "--config", str(server.path), "--receiver", "0", name="producer0")
    with Client.from_config(server.config, name="test") as client:
        wait_until(lambda: ("producer", "r0t0") in client.statuses("producer"), START_S, "the daemon idle")
    partial = raw / (raw_file_name(3, 0, 0) + ".partial")
    assert not mine.exists() and partial.read_bytes() == b"x" * RAW_HEADER_BYTES
    assert others.read_bytes() == b"y", "another receiver's file is its daemon's to mark"
    assert f"renamed {partial.name}" in processes.output(daemon)
