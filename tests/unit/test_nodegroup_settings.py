"""What a NodeGroup is told about its upstream, from the configuration: one producer-thread count
per receiver (a sector it lacks is lost once that sector's producer thread has gone past it)."""

from __future__ import annotations

import pytest

from sectorflow._core.nodegroup import NodeGroupError, NodeGroupSettings
from sectorflow.consumer.nodegroup.nodegroup_service import settings_from


def test_settings_carry_each_receivers_producer_threads(make_config) -> None:
    receivers = [{"host": "127.0.0.1", "threads": n} for n in (1, 2, 4, 3)]
    config, _ = make_config(receivers=receivers)
    settings = settings_from(config, "ng-1", counting_threads=2)
    assert settings.producer_threads == [1, 2, 4, 3]
    assert settings.receivers == 4 and settings.counting_threads == 2


@pytest.mark.parametrize(("threads", "message"), [
    ([1, 1], "2 producer thread counts for 4 receivers; give one per [[receivers]] entry"),
    ([1, 0, 1, 1], "[[receivers]] 1 has 0 producer threads; need at least 1"),
])
def test_wrong_producer_threads_are_refused_by_name(make_config, threads: list[int], message: str) -> None:
    config, _ = make_config()
    ng = config.nodegroup
    with pytest.raises(NodeGroupError, match=r"^NodeGroup ng-1: ") as raised:
        NodeGroupSettings(uid="ng-1", host="127.0.0.1", geometry=config.geometry(), receivers=4,
                          counting_threads=ng.counting_threads, recv_hwm=ng.recv_hwm, pool_frames=ng.pool_frames,
                          scan_timeout_s=ng.scan_timeout_s, thresholds=settings_from(config, "ng-1", 1).thresholds,
                          producer_threads=threads, max_scan_positions=1024, max_open_scans=4)
    assert str(raised.value).endswith(message)
