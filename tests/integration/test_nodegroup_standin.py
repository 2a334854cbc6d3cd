"""The NodeGroup stand-in the producer and aggregator tests use registers, records and leaves."""

from __future__ import annotations

import sys
from pathlib import Path

import zmq
from support import STANDIN, read_jsonl, wait_until

from sectorflow.kvstore import Client
from sectorflow.protocol import NodeGroupRecord
from sectorflow.protocol import DataHeader, encode_header


def test_standin_registers_records_and_deregisters(make_config, processes, tmp_path: Path) -> None:
    config, path = make_config()
    server = processes.sectorflow("kvstore", "--config", str(path), name="kvstore")
    out = tmp_path / "standin.jsonl"
    standin = processes.start(sys.executable, str(STANDIN), "--config", str(path), "--uid", "ng-a", "--out",
                              str(out), name="standin")
    with Client.from_config(config, name="test") as client:
        record = wait_until(lambda: client.get("nodegroups/ng-a"), 20, "the stand-in to register")
        ports = NodeGroupRecord.decode(record).ports
        assert len(ports) == config.n_receivers
        with zmq.Context() as context, context.socket(zmq.PUSH) as push:
            push.connect(f"tcp://127.0.0.1:{ports[2]}")
            header = DataHeader(scan_number=1, frame_number=3, sector=2, scan_x=2, scan_y=2, position_x=1,
                                position_y=1)
            push.send_multipart([encode_header(header), b"\0" * 10])
            lines = wait_until(lambda: [l for l in read_jsonl(out) if l["kind"] == "data"], 20, "the message")
            assert lines[0]["thread"] == 2 and lines[0]["header"][2] == 3 and lines[0]["payload_bytes"] == 10
        assert processes.stop(standin) == 0
        wait_until(lambda: client.get("nodegroups/ng-a") is None, 20, "the stand-in to deregister")
    assert server.poll() is None
