"""The WAN of the namespace test bed: TCP between a receiver host and a compute node sees the set
round trip, UDP the set loss (every packet accounted by the delay line), and nothing the topology
created outlives it."""

from __future__ import annotations

import subprocess
import sys

import harness.netlab.probe
from harness.netlab import Topology
from harness.netlab.topology import _namespaces
from support import Processes, wait_until

PORT = 7001
# A file, not ``-m``: it runs inside a namespace from any working directory.
PROBE = [sys.executable, harness.netlab.probe.__file__]


def test_tcp_connect_between_sides_takes_at_least_the_set_round_trip(processes: Processes) -> None:
    one_way_ms = 15.0
    with Topology(delay_ms=one_way_ms) as net:
        compute = net.address("compute1")
        listener = processes.start(*net.command("compute1", [*PROBE, "tcp-listen", compute, str(PORT)]), name="listen")
        wait_until(lambda: "listening" in processes.output(listener), 20, "the TCP listener on compute1")
        times = []
        for _ in range(3):
            done = subprocess.run(net.command("recv1", [*PROBE, "tcp-connect", compute, str(PORT)]),
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            times.append(float(done.stdout))
        processes.stop(listener)
    # A connect is one round trip: SYN out, SYN-ACK back, each through the delay line.
    assert min(times) >= 2 * one_way_ms / 1000


def test_udp_across_the_wan_loses_the_set_fraction_and_every_packet_is_accounted(processes: Processes) -> None:
    sent, loss = 4000, 0.05
    with Topology(loss=loss, seed=7) as net:
        compute = net.address("compute2")
        sink = subprocess.Popen(net.command("compute2", [*PROBE, "udp-sink", compute, str(PORT)]),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert sink.stdout is not None and sink.stdout.readline().strip() == "bound"
            done = subprocess.run(net.command("recv3", [*PROBE, "udp-send", compute, str(PORT), str(sent)]),
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            assert net.delay_line is not None
            counters = net.delay_line.stop()  # releases everything in flight, then reports
            received, _ = sink.communicate("", timeout=30)
        finally:
            if sink.poll() is None:
                sink.kill()
                sink.wait()
    assert counters is not None
    forward = counters.a_to_b
    assert forward.read == sent
    assert forward.forwarded + forward.dropped_loss == sent
    assert forward.dropped_down == forward.dropped_ring_full == forward.write_errors == forward.unreleased_at_exit == 0
    assert int(received) == forward.forwarded
    # 4000 draws at p = 0.05: mean 200, standard deviation 14; the seed fixes the outcome.
    assert 100 <= forward.dropped_loss <= 300


def test_leaving_the_topology_removes_every_namespace_and_the_delay_line(processes: Processes) -> None:
    with Topology(delay_ms=1.0) as net:
        names = set(net.namespaces)
        assert names <= set(_namespaces())
        assert net.delay_line is not None
        line = net.delay_line.process
        # A process that lives until it is killed (it waits for a signal), as a service would.
        sleeper = processes.start(*net.command("compute1", [sys.executable, "-c", "import signal; signal.pause()"]),
                                  name="sleeper")
        wait_until(lambda: sleeper.pid in _pids(net.hosts["compute1"].namespace), 20, "the process in compute1")
    assert not names & set(_namespaces())
    assert line.poll() is not None
    wait_until(lambda: sleeper.poll() is not None, 20, "the process in compute1 to be killed")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert net.run_id not in links and "wan0" not in links and "wan1" not in links


def test_a_failure_inside_the_context_still_removes_everything() -> None:
    names: set[str] = set()
    try:
        with Topology() as net:
            names = set(net.namespaces)
            raise KeyboardInterrupt  # what Ctrl-C raises
    except KeyboardInterrupt:
        pass
    assert names and not names & set(_namespaces())


def _pids(namespace: str) -> list[int]:
    done = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True, check=True)
    return [int(word) for word in done.stdout.split()]


def test_namespaces_left_by_a_killed_run_are_swept_by_the_next() -> None:
    dead = subprocess.Popen(["true"])  # its PID no longer runs: a run killed before its cleanup
    dead.wait()
    stale = f"sfnl-{dead.pid}x0-recv1"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        with Topology() as net:
            assert stale not in _namespaces()
            assert set(net.namespaces) <= set(_namespaces())  # a live run's own are kept
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True)
