"""Scan numbers are claimed, not guessed: concurrent `sectorflow acquire` processes without
--scan-number get different numbers (the kvstore takes one create-only claim per number), a number
another acquire claimed is skipped or refused, and the producers acquire each claimed scan."""

from __future__ import annotations

import re
import subprocess
import sys

from producer_support import SMALL_DETECTOR, START_S, small_receivers, start_kvstore
from support import wait_until

from sectorflow.kvstore import Client
from sectorflow.protocol import ServiceStatus, scan_prefix, status_key
from sectorflow.operations.scan_account import records_of
from sectorflow.protocol.scan_life import ScanClaim, claim_key

ACQUIRES = 4
ACQUIRE_S = 60.0


def test_concurrent_acquires_get_different_numbers(make_config, processes) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1))
    path = server.path
    daemons = [processes.sectorflow("producer", "--config", str(path), "--receiver", str(r), name=f"producer{r}")
               for r in range(4)]
    with Client.from_config(server.config, name="test", role="operator") as client:
        wait_until(lambda: len(client.statuses("producer")) == 4, START_S, "4 producer threads to report idle")
        # Numbers 1 and 2 were claimed by acquires that died before requesting: nobody takes them again.
        for scan in (1, 2):
            client.create_once(claim_key(scan), ScanClaim("elsewhere:1:dead", 0.0).encode())
        wait_until(lambda: all(client.get(claim_key(s)) for s in (1, 2)), START_S, "the two old claims")

        # Started together, each reads the same replica, so they pick the same next number and race for it.
        started = [subprocess.Popen([sys.executable, "-m", "sectorflow", "acquire", "--config", str(path),
                                     "--scan-shape", "2x2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for _ in range(ACQUIRES)]
        outputs = [process.communicate(timeout=ACQUIRE_S) for process in started]
        assert [process.returncode for process in started] == [0] * ACQUIRES, outputs
        numbers = sorted(int(re.match(r"scan (\d+): requested 2 x 2", out).group(1)) for out, _ in outputs)
        assert numbers == [3, 4, 5, 6], outputs

        # Each claim names one process, and the kvstore counted every claim it refused.
        # (read as acquire reads them: a scan over is folded into its summary, kvstore/SPEC.md "Folding")
        claimants = {records_of(client.subtree(scan_prefix(scan)), scan).claim.claimant for scan in numbers}
        assert len(claimants) == ACQUIRES
        server_status = ServiceStatus.decode(client.get(status_key("kvstore", "server")))
        assert server_status.extra["creates_refused"] >= 0  # how many raced depends on the start-up order

        # Every claimed scan was acquired by every producer thread (written to disk: no NodeGroup).
        def acquired(scan: int) -> bool:
            parts = records_of(client.subtree(scan_prefix(scan)), scan).producers
            return len(parts) == 4 and all(part.state == "finished" for part in parts.values())

        wait_until(lambda: all(acquired(scan) for scan in numbers), START_S, "the four scans acquired")

        # A number given with --scan-number that another acquire claimed is refused at once (a bad argument,
        # exit 2), naming the next.
        result = subprocess.run([sys.executable, "-m", "sectorflow", "acquire", "--config", str(path),
                                 "--scan-number", "1", "--scan-shape", "2x2"], capture_output=True, text=True,
                                timeout=ACQUIRE_S)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines()[-1] == ("sectorflow acquire: error: scan 1 is claimed by another acquire "
                                                  "(elsewhere:1:dead): a scan number is used once; the next unused is 7")
        # --replay streams a given scan's files: it needs the number.
        result = subprocess.run([sys.executable, "-m", "sectorflow", "acquire", "--config", str(path),
                                 "--scan-shape", "2x2", "--replay"], capture_output=True, text=True, timeout=ACQUIRE_S)
        assert result.returncode == 2 and result.stderr.splitlines()[-1] == (
            "sectorflow acquire: error: --replay needs --scan-number: the scan whose raw files are streamed")
    for daemon in daemons:
        assert processes.stop(daemon) == 0
        assert "Traceback" not in processes.output(daemon)
