"""The end of transport path (c): one real NodeGroup with counting switched off, as a process.

``python -m bench.assembly_sink --config FILE --uid UID --timeout-s T`` builds the NodeGroup of
the configuration (``settings_from(..., count=False)``: its receiver threads, inproc hand-off and
frame assembly by reference, without electron counting), registers it in the kvstore
as the ``nodegroup`` service does, so that the aggregator finds it, and prints one JSON line
``{"uid", "ports", "cpu_s"}``. Then it waits for one scan (at most T seconds; SIGTERM ends it
early) and prints ``{"messages", "bytes", "seconds", "frames_complete", "frames_incomplete",
"late", "evicted", "timed_out", "cpu_s", "threads"}``: ``seconds`` from the scan's first message to the
moment every frame was assembled, ``cpu_s`` the CPU seconds of the process so far, ``threads`` the
same by thread name (sf-receive-0, sf-count-0, ZMQbg/IO/0, ...) as /proc counts them. Errors are one line on
stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys

from bench.proc_stats import thread_cpu_seconds
from sectorflow.configs import ConfigError, load_config
from sectorflow.errors import SectorflowError
from sectorflow.kvstore import Client
from sectorflow.protocol import NodeGroupRecord, nodegroup_key
from sectorflow.consumer.nodegroup import NodeGroup, settings_from
from sectorflow.service import stop_on_signals
from sectorflow.waiting import WaitTimeout, wait_until

log = logging.getLogger("bench.assembly_sink")

WAIT_SLICE_S = 0.1  # how often the wait for the scan looks at the stop signal


def cpu_s() -> float:
    """CPU seconds (user + system, every thread) of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.assembly_sink", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, metavar="FILE")
    parser.add_argument("--uid", required=True)
    parser.add_argument("--timeout-s", type=float, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        config = load_config(args.config)
        group = NodeGroup(settings_from(config, args.uid, config.nodegroup.counting_threads, count=False))
    except (ConfigError, SectorflowError) as error:
        print(f"assembly_sink: error: {error}", file=sys.stderr)
        return 2
    try:
        with Client.from_config(config, name="assembly-sink", role="nodegroup") as client, stop_on_signals(log) as stop:
            record = NodeGroupRecord(uid=args.uid, host=config.nodegroup.host, ports=list(group.ports))
            client.set(nodegroup_key(args.uid), record.encode(), config.kvstore.ttl_s)
            print(json.dumps({"uid": args.uid, "ports": list(group.ports), "cpu_s": cpu_s()}), flush=True)
            try:
                # Each poll blocks in the NodeGroup for up to WAIT_SLICE_S; a stop ends the wait between two.
                result = wait_until(lambda: group.wait_scan(WAIT_SLICE_S), args.timeout_s, "a finished scan", 0.0,
                                    stop=stop)
            except WaitTimeout:
                result = None
            if result is None:
                print(f"assembly_sink: error: no scan finished within {args.timeout_s:g} s", file=sys.stderr)
                return 2
            print(json.dumps({
                "messages": int(sum(result.received)),
                "bytes": int(result.bytes),
                "seconds": result.finished_s - result.first_message_s,
                "frames_complete": int(result.frames_complete),
                "frames_incomplete": int(result.frames_incomplete),
                "late": int(result.late_messages),
                "evicted": int(result.evicted_frames),
                "timed_out": bool(result.timed_out),
                "cpu_s": cpu_s(),
                "threads": thread_cpu_seconds(os.getpid()),
            }), flush=True)
            return 0
    finally:
        group.stop()


if __name__ == "__main__":
    sys.exit(main())
