"""The disk fills during a spill, then the scan is replayed into a new NodeGroup job.

Receiver 0 speaks the detector's native header, the others SFSP. The aggregator stalls a quarter into
the scan, so every producer spills; the fallback directory is a small tmpfs that fills on the way, so
each receiver's raw file ends ``.partial``. The replay's account adds to the first run's: the first
file's sectors plus every whole record the raw files hold are counted, and only what the full disk
could not hold is missing. The first file never changes.

Prints its row of the fault table (``pytest tests/faults -s``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from beamline import Beamline
from test_faults import RATE_HZ, checked, first_scan, reasons_are

from sectorflow.kvstore import Client
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.waiting import wait_until

pytestmark = pytest.mark.mpi

SHAPE, SECTORS = "32x32", 4096
# Struck a quarter in, each receiver has some 700 to 770 sectors of 166 kB left to spill: the disk
# (2,560 records) holds any three receivers' spills, never all four, so it fills mid-spill and
# every receiver, the native one included, has records to replay whichever spills last.
DISK = "405m"


def native_receivers() -> list[dict[str, object]]:
    return [{"host": "127.0.0.1", "threads": 1, "wire": "native" if receiver == 0 else "sectorflow"}
            for receiver in range(4)]


def test_disk_full_during_a_spill_then_replay_adds_to_the_first_account(beamline, tmp_path: Path) -> None:
    raw = tmp_path / "small-disk"
    raw.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(raw)], check=True)
    try:
        line = beamline(producer={"send_timeout_ms": 1000, "fallback_dir": str(raw)},
                        receivers=native_receivers())
        supervisor = line.start()
        before = first_scan(line)
        aggregator = supervisor.process("aggregator").pid
        with Client.from_config(line.config, name="fault-test") as client:
            client.wait_synced(10.0)
            acquire = line.acquire(2, SHAPE, RATE_HZ)
            line.wait_sent(client, 2, SECTORS // 4)
            os.kill(aggregator, signal.SIGSTOP)
        try:
            first = checked(line, Beamline.finish(acquire), 2, "disk full during a spill (aggregator stalled)",
                            SECTORS)
        finally:
            os.kill(aggregator, signal.SIGCONT)
        names = sorted(p.name for p in raw.iterdir())
        assert any(name.endswith(".partial") for name in names), names
        assert first.spilled > 0 and first.missing > 0 and first.exit_code == 1, first.output
        assert all(list(raw.glob(f"*module{r}*")) for r in range(4)), names  # the native receiver's too
        written = line.checksums()
        # A job that counted the scan refuses another count: the replay goes to the next job.
        line.restart("nodegroups", kill=False)
        with Client.from_config(line.config, name="fault-test") as client:
            wait_until(lambda: len(client.nodegroups()) == 2, 60, "the next job's NodeGroups")
        replay = checked(line, Beamline.finish(line.acquire(2, SHAPE, 0.0, "--replay")), 2,
                         "disk full during a spill, then replay into a new job", SECTORS, replay=True)
        on_disk = line.records_on_disk(2)
        # What the first run counted plus every whole record on the full disk; missing only what it could not hold.
        assert replay.counted == first.counted + on_disk, replay.output
        assert replay.missing == SECTORS - first.counted - on_disk == first.missing, replay.output
        assert replay.counted + replay.missing == SECTORS and replay.exit_code == 1, replay.output
        reasons_are(replay, "not in the receiver's raw files")
        # Replayed sectors of frames the first file holds incomplete join those frames: no part file
        # beside the merged one holds sectors the account would not see.
        assert sorted(p.name for p in line.output_dir.iterdir()) == \
            [scan_file_name(1), scan_file_name(2), scan_file_name(2, 2)], replay.output
        assert replay.path == line.output_dir / scan_file_name(2, 2), replay.output
        assert {k: v for k, v in line.checksums().items() if k in written} == written
        assert {k: v for k, v in written.items() if k in before} == before
        line.stop()
    finally:
        subprocess.run(["umount", "-l", str(raw)], check=False)
