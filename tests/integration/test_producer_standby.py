"""Producers of a stack with a standby aggregator on another address ([aggregator] standby_host): each
thread connects to both with ZMQ_IMMEDIATE, so every message goes to the one aggregator that is bound,
none waits on the pipe of the one that is not, and after the bound one is gone the next scan reaches
the other once it binds."""

from __future__ import annotations

import zmq
from producer_support import (
    SMALL_DETECTOR,
    Upstream,
    run_threads,
    small_receivers,
    start_kvstore,
    start_standin,
    upstream_for,  # noqa: F401  (fixture)
    wait_for_nodegroups,
)

from harness import free_port_block
from sectorflow.kvstore import Client
from sectorflow.producer import Producer, ScanRequest, producer_options, simulator_source
from sectorflow.simulator import simulator_from_config

SCAN_X, SCAN_Y = 5, 3
THREADS = 2


def test_only_the_bound_aggregator_gets_messages_and_the_other_after_a_takeover(
    make_config, processes, tmp_path, upstream_for
) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(THREADS))
    config = server.config
    start_standin(processes, server.path, tmp_path, "ng-a")
    active = upstream_for(config)
    # The standby's ports: another block (on one machine the standby differs by port, not host).
    standby_base = free_port_block("127.0.0.1", config.n_receivers)
    sim = simulator_from_config(config)
    n_frames = SCAN_X * SCAN_Y
    sectors = n_frames * config.n_receivers
    with Client.from_config(config, name="test") as client:
        wait_for_nodegroups(client, ["ng-a"])
        producers = []
        for r in range(config.n_receivers):
            for t in range(THREADS):
                options = producer_options(config, r, t)
                options.standby_endpoint = f"tcp://127.0.0.1:{standby_base + r}"
                producers.append(Producer(options, client))

        def scan(number: int) -> None:
            request = ScanRequest(scan_number=number, scan_x=SCAN_X, scan_y=SCAN_Y)
            run_threads([lambda p=p: p.run_scan(request, simulator_source(sim, number, p.options.receiver, n_frames,
                                                                          THREADS, p.options.thread_id))
                         for p in producers])

        # Only the active is bound: a PUSH without ZMQ_IMMEDIATE would queue half the messages for
        # the standby's pipe, and the active would never see them.
        scan(1)
        active.collect(len(producers), sectors, "every message of scan 1 at the active")
        assert len(active.data) == sectors and len(active.infos) == len(producers)
        # The active goes; the standby binds its own ports: scan 2 reaches it whole, the dead one nothing.
        for pull in active.sockets:
            pull.close(0)
        pulls = []
        for r in range(config.n_receivers):
            pull = active.context.socket(zmq.PULL)
            pull.setsockopt(zmq.LINGER, 0)
            pull.bind(f"tcp://127.0.0.1:{standby_base + r}")
            pulls.append(pull)
        standby = Upstream(active.context, pulls)
        try:
            scan(2)
            standby.collect(len(producers), sectors, "every message of scan 2 at the standby")
            assert {header[1] for _, header, _ in standby.data} == {2}
            assert len(standby.data) == sectors
        finally:
            for pull in pulls:
                pull.close(0)
