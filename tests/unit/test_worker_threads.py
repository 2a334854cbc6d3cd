"""Every thread the project's C++ starts in a Python process blocks the stop signals, so that SIGINT
and SIGTERM reach the main thread, the only one where Python runs their handlers (a signal the kernel
gave a worker left the main thread asleep until its wait ended). Read from /proc in a fresh process:
the threads that a kvstore client and a counter add. Each is named for what it does, as `top -H`,
`ps -L` and perf show it, where every thread of a Python service would otherwise be "python"."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

SCRIPT = r"""
import json, os, threading
from sectorflow.configs import load_config
from sectorflow.consumer.counting import Counter
from sectorflow.kvstore import Client
from sectorflow.waiting import wait_until

def threads():
    names = {}
    for tid in os.listdir("/proc/self/task"):
        fields = dict(line.split(":", 1) for line in open(f"/proc/self/task/{tid}/status").read().splitlines())
        names[tid] = {"name": fields["Name"].strip(), "blocked": int(fields["SigBlk"], 16)}
    return names

before = threads()  # the main one, and those of the libraries imported (OpenBLAS's, for one)
client = Client.from_config(load_config(), name="signals")  # its agent thread, which starts libzmq's
counter = Counter((8, 8), background_threshold=1.0, threads=3)  # two worker threads
# The agent creates its context when it starts: libzmq's I/O and reaper threads, which carry the
# agent's name until they have named themselves.
wait_until(lambda: sum(t["name"].startswith("ZMQbg") for t in threads().values()) >= 2, 30, "libzmq's threads")
assert threading.active_count() == 1, "no Python thread besides the main one"
print(json.dumps({"main": threads()[str(os.getpid())], "new": {t: v for t, v in threads().items() if t not in before}}))
client.close()
"""


def test_no_thread_but_the_main_one_takes_a_stop_signal() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    stop_bits = {signum: 1 << (signum - 1) for signum in (signal.SIGINT, signal.SIGTERM)}
    assert not any(seen["main"]["blocked"] & bit for bit in stop_bits.values()), seen["main"]
    # The agent, the counter's two workers and libzmq's I/O and reaper threads.
    assert len(seen["new"]) >= 5, seen
    names = sorted(thread["name"] for thread in seen["new"].values() if not thread["name"].startswith("ZMQbg"))
    assert names == ["sf-counter-1", "sf-counter-2", "sf-kvstore"], names
    for tid, thread in seen["new"].items():
        for signum, bit in stop_bits.items():
            assert thread["blocked"] & bit, f"thread {tid} ({thread['name']}) can take {signum.name}"
