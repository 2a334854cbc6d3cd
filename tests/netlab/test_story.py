"""The whole story on separate hosts, secured like the beamline (CURVE, keys from
``sectorflow.security.keys.generate``), with a WAN of 10 ms round trip between the aggregator and
the compute nodes: a scan with no NodeGroup falls back to raw files on the receiver hosts; the
NodeGroups of both compute nodes join; a scan streams across the WAN into an HDF5 file equal to
stempy's counting; the fallback scan is replayed and reduced the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.netlab import Topology
from harness.netlab.stack import NetlabStack, netlab_config
from keyring import Keyring
from netlab_beamline import finish
from support import Processes, assert_counted_as_stempy

from sectorflow.protocol import find_raw_files

pytestmark = pytest.mark.mpi

SCAN_X, SCAN_Y = 6, 4
SECTORS = SCAN_X * SCAN_Y * 4
BACKGROUND, XRAY = 30.0, 1000.0


def test_fallback_then_stream_across_the_wan_then_replay(processes: Processes, tmp_path: Path) -> None:
    keys = Keyring(tmp_path / "keys")
    config, path = netlab_config(tmp_path, counting={"background_threshold": BACKGROUND, "xray_threshold": XRAY},
                                 security={"enabled": True, "allow_insecure": False, "key_dir": str(keys.beamline)})
    raw = Path(config.producer.fallback_dir)
    shape = f"{SCAN_X}x{SCAN_Y}"
    with Topology(delay_ms=5.0) as net:
        stack = NetlabStack(net, config, path, processes.supervisor)
        try:
            stack.start()

            # 1. No NodeGroup anywhere: every receiver host's producers write the scan to raw files.
            first = finish(stack, stack.acquire(1, shape))
            assert (first.outcome, first.on_disk, first.spilled, first.missing) == (
                "on disk, not counted", SECTORS, 0, 0), first.output
            assert len(find_raw_files(str(raw), 1)) == sum(receiver.threads for receiver in config.receivers)

            # 2. A NodeGroup on each compute node joins across the WAN; the next scan streams.
            stack.start_nodegroups()
            second = finish(stack, stack.acquire(2, shape))
            assert (second.outcome, second.exit_code, second.counted) == ("complete", 0, SECTORS), second.output
            assert second.path is not None
            assert_counted_as_stempy(config, second.path, 2, (SCAN_X, SCAN_Y), BACKGROUND, XRAY)
            assert find_raw_files(str(raw), 2) == []

            # 3. The fallback scan replayed from the receivers' raw files is reduced like a streamed one.
            replayed = finish(stack, stack.acquire(1, shape, 0.0, "--replay"))
            assert (replayed.outcome, replayed.exit_code, replayed.counted) == ("complete", 0, SECTORS), replayed.output
            assert replayed.path is not None
            assert_counted_as_stempy(config, replayed.path, 1, (SCAN_X, SCAN_Y), BACKGROUND, XRAY)
        finally:
            stack.stop()
