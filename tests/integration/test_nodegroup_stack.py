"""A NodeGroup's registration names its stack (kvstore/SPEC.md, "The stack's identity"): a real
NodeGroup job registers with the id of the kvstore it synced with, registers again in the new stack
when the kvstore restarts without its log, and `sectorflow status` flags a registration of another
stack; a producer daemon refused by a live one of another stack id names both ids."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from kvstore_support import SYNC_S, RawPeer, start_kvstore
from nodegroup_support import START_S, start_job
from producer_support import SMALL_DETECTOR, small_receivers
from support import Processes, sectorflow_command, wait_until

from sectorflow.kvstore import Client, client_options, is_stack_id
from sectorflow.protocol import NodeGroupRecord, ServiceStatus, nodegroup_key, status_key

SMALL = {"detector": {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}}
FOREIGN = "f" * 16  # a stack id no kvstore of these tests made (theirs are random)


@pytest.mark.mpi
def test_a_nodegroup_registers_in_its_stack_and_again_in_the_new_one_after_a_restart_without_log(
    make_config: Callable, processes: Processes, tmp_path: Path
) -> None:
    server = start_kvstore(make_config, processes, **SMALL)
    path = str(server.path)
    job = start_job(processes, server.path, tmp_path / "out", ranks=1, name="job")
    with Client(client_options(server.config)) as reader:
        assert reader.wait_synced(SYNC_S)
        old = reader.stack_id
        wait_until(lambda: len(reader.nodegroups()) == 1 or job.poll() is not None, START_S,
                   "the NodeGroup to register")
        (first,) = reader.nodegroups()
        assert first.stack_id == old and is_stack_id(old), processes.output(job)

    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()
    server.start()  # no log_dir: a new, empty stack
    with Client(client_options(server.config)) as reader:
        assert reader.wait_synced(SYNC_S)
        new = reader.stack_id
        assert is_stack_id(new) and new != old

        def registered() -> list[NodeGroupRecord]:
            return [record for record in reader.nodegroups() if record.stack_id == new]

        wait_until(lambda: registered() or job.poll() is not None, START_S, "the NodeGroup to register again")
        (again,) = registered()
        assert (again.uid, again.ports) == (first.uid, first.ports) and job.poll() is None, processes.output(job)

        shown = sectorflow_command("status", "--config", path)
        assert shown.returncode == 0, shown.stderr
        assert f": stack {new}, sequence " in shown.stdout.splitlines()[0]
        assert f"nodegroup {first.uid}: STACK CHANGED: joined stack {old}, now in stack {new}" in shown.stdout
        assert "OTHER STACK" not in shown.stdout, shown.stdout

        # A registration that names another stack (what a NodeGroup writes in the moment before its
        # client's sync with a restarted kvstore ends) is flagged until it is replaced.
        foreign = NodeGroupRecord(uid="elsewhere", host="127.0.0.1", ports=[1, 2, 3, 4], stack_id=FOREIGN)
        reader.set(nodegroup_key("elsewhere"), foreign.encode(), server.config.nodegroup.liveness_ttl_s)
        wait_until(lambda: any(r.uid == "elsewhere" for r in reader.nodegroups()), SYNC_S, "the foreign registration")
        shown = sectorflow_command("status", "--config", path)
        assert shown.returncode == 0, shown.stderr
        flagged = [line for line in shown.stdout.splitlines() if "OTHER STACK" in line]
        assert flagged == [f"nodegroups/elsewhere: OTHER STACK: registered in stack {FOREIGN}, not the kvstore's "
                           f"{new}: its NodeGroup had not synced with this kvstore when it wrote it, and writes it "
                           "again once it has"], shown.stdout


def test_a_producer_daemon_refused_by_a_live_one_of_another_stack_names_both_stacks(
    make_config: Callable, processes: Processes
) -> None:
    server = start_kvstore(make_config, processes, detector=SMALL_DETECTOR, receivers=small_receivers(1))
    with Client(client_options(server.config)) as reader:
        assert reader.wait_synced(SYNC_S)
        ours = reader.stack_id
        # A live daemon's thread (this test process: alive, on this host) whose status names another
        # stack. A client stamps its own stack into what it writes, so this one is sent by hand.
        status = ServiceStatus(state="idle", extra={"receiver": 0, "host": socket.gethostname(), "pid": os.getpid(),
                                                    "stack_id": FOREIGN})
        key = status_key("producer", "r0t0")
        peer = RawPeer(server.port)
        try:
            peer.kvset_until(key.encode(), status.encode(), lambda: reader.get(key) is not None,
                             "the other stack's status")
        finally:
            peer.close()

    refused = sectorflow_command("producer", "--config", str(server.path), "--receiver", "0", timeout_s=60)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr.splitlines()[-1] == (
        f"sectorflow producer: error: a producer daemon for receiver 0 is running already (host "
        f"{socket.gethostname()}, pid {os.getpid()}; its status 'r0t0' is live; it runs in stack {FOREIGN}, not this "
        f"one's {ours}: a leftover of another stack that has not synced with this kvstore): one stack has one; stop "
        f"that one first (on {socket.gethostname()}: kill {os.getpid()}), or use another configuration"), refused.stderr
