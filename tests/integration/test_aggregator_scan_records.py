"""The aggregator's part of "no scan lost silently": relay records, the backpressure policy and
recovery after a restart (protocol/SPEC.md steps 4 and 5, kvstore/SPEC.md "scans/<n:010d>/...").

Processes: `sectorflow kvstore`, `sectorflow aggregator`, NodeGroup stand-ins (one of which can
register and never read); producers are pyzmq PUSH sockets in the test, and the producer threads'
scan records are written by the test as a producer would write them.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from aggregator_support import SMALL, START_S, Pipeline, digest, payload, route
from support import Processes, wait_until

from sectorflow.kvstore import Client
from sectorflow.protocol import ProducerScanRecord, RelayScanRecord, scan_producer_key, scan_relay_key

DELIVERY_S = 60.0
# Sectors of 128 KiB (4 x 128 x 512 uint16) and a small high-water mark, so that a NodeGroup that
# does not read fills its queues and kernel buffers long before the scan ends.
LARGE = {
    "detector": {"frame_rows": 512, "frame_cols": 512, "sector_rows": 128, "sector_cols": 512, "dtype": "uint16"},
    "receivers": [{"host": "127.0.0.1", "threads": 1}] * 4,
    "aggregator": {"hwm": 4, "send_timeout_ms": 1000},
}


def start_pipeline(make_config, processes: Processes, tmp_path: Path, **overrides) -> Pipeline:
    config, path = make_config(**overrides)
    processes.sectorflow("kvstore", "--config", str(path), name="kvstore")
    client = Client.from_config(config, name="test")
    pipe = Pipeline(config, path, processes, tmp_path, client)
    pipe.aggregator = processes.sectorflow("aggregator", "--config", str(path), name="aggregator")
    wait_until(lambda: len(pipe.statuses()) == config.n_receivers, START_S, "the aggregator's statuses")
    return pipe


@pytest.fixture
def large(make_config, processes: Processes, tmp_path: Path) -> Iterator[Pipeline]:
    pipe = start_pipeline(make_config, processes, tmp_path, **LARGE)
    try:
        yield pipe
    finally:
        pipe.close()
        pipe.client.close()


@pytest.fixture
def small(make_config, processes: Processes, tmp_path: Path) -> Iterator[Pipeline]:
    pipe = start_pipeline(make_config, processes, tmp_path, **SMALL)
    try:
        yield pipe
    finally:
        pipe.close()
        pipe.client.close()


def relay_records(pipe: Pipeline, scan: int) -> dict[int, RelayScanRecord]:
    out = {}
    for r in range(pipe.config.n_receivers):
        raw = pipe.client.get(scan_relay_key(scan, r))
        if raw is not None:
            out[r] = RelayScanRecord.decode(raw)
    return out


def announced(pipe: Pipeline, scan_x: int, scan_y: int, routing: list[str], receiver: int) -> Counter:
    """What receiver `receiver`'s producer threads announce per NodeGroup: one message per frame."""
    return Counter(route(routing, f) for f in range(scan_x * scan_y))


def write_producer_records(pipe: Pipeline, scan: int, scan_x: int, scan_y: int, routing: list[str]) -> None:
    """Every producer thread's scan record, as a producer writes it before its info message."""
    for r, receiver in enumerate(pipe.config.receivers):
        for t in range(receiver.threads):
            frames = pipe.frames_of(scan_x, scan_y, r, t)
            counts = Counter(route(routing, f) for f in frames)
            record = ProducerScanRecord(receiver=r, thread=t, state="streaming", routing=routing,
                                        counts={uid: counts.get(uid, 0) for uid in routing}, owned=len(frames),
                                        lost_upstream=0, sent=0, spilled=0, spill_file="", partial=False, error="",
                                        updated_s=0.0)
            pipe.client.set_once(scan_producer_key(scan, r, t), record.encode(), pipe.config.kvstore.scan_record_ttl_s)
    wait_until(lambda: all(pipe.client.get(scan_producer_key(scan, r, t)) is not None
                           for r, receiver in enumerate(pipe.config.receivers) for t in range(receiver.threads)),
               START_S, "the producer records in the kvstore")


def test_a_nodegroup_that_never_reads_is_declared_dead_and_the_others_get_everything(large: Pipeline) -> None:
    live = large.start_standin("ng-live")
    large.start_standin("ng-stalled", "--never-read")
    routing = ["ng-live", "ng-stalled"]
    scan_x, scan_y = 16, 16
    large.send_info(1, scan_x, scan_y, routing)
    large.send_data(1, scan_x, scan_y)

    # The live NodeGroup gets every one of its sectors, unchanged, whatever the stalled one does.
    want = {f for f in range(scan_x * scan_y) if route(routing, f) == "ng-live"}
    lines = wait_until(lambda: (d := live.data(1)) and len(d) >= len(want) * 4 and d, DELIVERY_S,
                       "every sector of ng-live")
    assert Counter((l["header"][2], l["header"][3]) for l in lines) == Counter({(f, s): 1 for f in want
                                                                                for s in range(4)})
    assert all(l["digest"] == digest(payload(large.config, 1, l["header"][2], l["header"][3])) for l in lines)

    # Each relay thread closes the scan without waiting for the stalled NodeGroup; its record names
    # it, and forwarded + lost per NodeGroup is what the producers announced for it.
    records = wait_until(lambda: (rs := relay_records(large, 1)) and len(rs) == 4
                         and all(r.complete for r in rs.values()) and rs, DELIVERY_S, "four closed relay records")
    for r, record in records.items():
        counts = announced(large, scan_x, scan_y, routing, r)
        assert record.thread == r
        assert record.dead == ["ng-stalled"]
        assert record.forwarded["ng-live"] == counts["ng-live"] and record.lost["ng-live"] == 0
        assert record.forwarded["ng-stalled"] + record.lost["ng-stalled"] == counts["ng-stalled"]
        assert record.lost["ng-stalled"] > 0

    statuses = wait_until(lambda: (s := large.statuses()) and all(st.extra["dead_nodegroups"] == 1
                                                                  for st in s.values()) and s,
                          DELIVERY_S, "every thread to count one dead NodeGroup")
    assert all(st.extra["malformed"] == 0 for st in statuses.values())
    log = large.processes.output(large.aggregator)
    assert "declared ng-stalled dead: a send stayed blocked for send_timeout_ms (1000 ms)" in log


def test_a_restarted_aggregator_rebuilds_a_scan_from_the_producer_records(small: Pipeline) -> None:
    for uid in ("ng-a", "ng-b"):
        small.start_standin(uid)
    routing = ["ng-a", "ng-b"]
    scan, scan_x, scan_y = 5, 10, 10
    write_producer_records(small, scan, scan_x, scan_y, routing)
    small.send_info(scan, scan_x, scan_y, routing)
    first, second = list(range(50)), list(range(50, 100))
    small.send_data(scan, scan_x, scan_y, frames=first)
    wait_until(lambda: sum(len(s.data(scan)) for s in small.standins.values()) == len(first) * 4, DELIVERY_S,
               "the first half at the NodeGroups")

    os.kill(small.aggregator.pid, signal.SIGKILL)
    small.aggregator.wait(START_S)
    small.aggregator = small.processes.sectorflow("aggregator", "--config", str(small.path), name="aggregator")
    wait_until(lambda: "state starting -> idle" in small.processes.output(small.aggregator), START_S,
               "the restarted aggregator")

    # The producers go on with the second half; the new process has no info for the scan.
    small.send_data(scan, scan_x, scan_y, frames=second)
    for uid in routing:
        standin = small.standins[uid]
        want = {f for f in range(scan_x * scan_y) if route(routing, f) == uid}
        lines = wait_until(lambda: (d := standin.data(scan)) and len(d) >= len(want) * 4 and d, DELIVERY_S,
                           f"all of scan {scan} at {uid}")
        assert Counter((l["header"][2], l["header"][3]) for l in lines) == Counter({(f, s): 1 for f in want
                                                                                    for s in range(4)})
        # The restarted relay sent each NodeGroup its expected count again, the same one.
        for r in range(4):
            counts = {i["info"]["counts"][uid] for i in standin.infos(scan) if i["thread"] == r}
            assert counts == {sum(1 for f in range(scan_x * scan_y) if route(routing, f) == uid)}

    # The new relay records count what the new process forwarded: the second half, nothing lost.
    def settled() -> dict[int, RelayScanRecord] | None:
        records = relay_records(small, scan)
        done = len(records) == 4 and all(sum(r.forwarded.values()) == len(second) for r in records.values())
        return records if done else None

    records = wait_until(settled, DELIVERY_S, "the restarted relay's records")
    for r, record in records.items():
        half = Counter(route(routing, f) for f in second)
        assert record.forwarded == {uid: half[uid] for uid in routing}
        assert record.lost == {uid: 0 for uid in routing} and record.dead == [] and not record.complete
    statuses = wait_until(lambda: (s := small.statuses()) and len(s) == 4 and all(
        st.extra.get("recovered_scans") == 1 and st.scan == scan for st in s.values()) and s, DELIVERY_S,
        "the recovered scan counted")
    assert all(st.extra["malformed_no_info"] == 0 for st in statuses.values())
    assert "rebuilt from" in small.processes.output(small.aggregator)
