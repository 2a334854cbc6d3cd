"""A NodeGroup stand-in for producer and aggregator tests: a real process that binds one PULL
socket per aggregator thread, registers in the real kvstore like a NodeGroup, and records every
message it receives as one JSON line (payloads as size and BLAKE2 digest) until SIGTERM.

    python nodegroup_standin.py --config F --uid UID --out FILE [--direct] [--never-read]

``--direct`` registers one port per *receiver* thread as well (ports[r] = socket r): producers
talk to aggregator threads, so a stand-in that plays an aggregator thread r's downstream is the
same thing. ``--never-read`` registers and then reads nothing (a NodeGroup that is connected but
stalled: its sockets hold one message and a small kernel buffer, so senders block soon).
Deregisters (closes its kvstore client) on SIGTERM.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import socket
import sys
from pathlib import Path

import msgpack
import zmq

from sectorflow.configs import load_config
from sectorflow.kvstore import Client
from sectorflow.protocol import NodeGroupRecord, nodegroup_key


def digest(payload: bytes) -> str:
    return hashlib.blake2b(payload, digest_size=16).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--uid", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--never-read", action="store_true")
    args = parser.parse_args()
    config = load_config(args.config)

    context = zmq.Context()
    sockets = []
    for _ in range(config.n_receivers):
        pull = context.socket(zmq.PULL)
        if args.never_read:
            pull.setsockopt(zmq.RCVHWM, 1)
            pull.setsockopt(zmq.RCVBUF, 4096)
        pull.bind("tcp://127.0.0.1:0")
        sockets.append(pull)
    ports = [int(s.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1]) for s in sockets]

    client = Client.from_config(config, name=f"standin-{args.uid}")
    record = NodeGroupRecord(uid=args.uid, host="127.0.0.1", ports=ports, node=socket.gethostname(), rank=0,
                             status="idle")
    client.set(nodegroup_key(args.uid), record.encode(), config.kvstore.ttl_s)

    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    poller = zmq.Poller()
    for pull in sockets:
        poller.register(pull, zmq.POLLIN)
    with open(args.out, "a") as out:
        out.write(json.dumps({"kind": "ready", "ports": ports}) + "\n")
        out.flush()
        while args.never_read and not stopping:
            signal.pause()  # woken by SIGTERM's handler
        while not stopping:
            for pull, _ in poller.poll(100):
                parts = pull.recv_multipart()
                thread = sockets.index(pull)
                if len(parts) == 1:
                    line = {"kind": "info", "thread": thread, "info": msgpack.unpackb(parts[0])}
                else:
                    line = {"kind": "data", "thread": thread, "header": msgpack.unpackb(parts[0]),
                            "parts": len(parts), "payload_bytes": len(parts[-1]), "digest": digest(parts[-1])}
                out.write(json.dumps(line) + "\n")
                out.flush()
    client.close()
    for pull in sockets:
        pull.close(linger=0)
    context.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
