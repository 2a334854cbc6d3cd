"""Two machines with one host name: a NodeGroup rank whose advertised host a live NodeGroup
of another machine registered is refused at start with one line, registers nothing, and starts
once that one is gone. The other machine is a kvstore client writing what its rank would."""

from __future__ import annotations

import socket

import pytest
from nodegroup_support import stack, start_job  # noqa: F401  (stack: fixture)
from support import wait_until

from sectorflow.kvstore import Client
from sectorflow.protocol import NodeGroupRecord, ServiceStatus, nodegroup_key, status_key

pytestmark = pytest.mark.mpi

SMALL = {"detector": {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}}
UID = "elsewhere-1-r0-g0"
START_S = 60.0


def test_a_rank_whose_host_name_another_machine_advertises_is_refused(stack, processes, tmp_path) -> None:
    config, path, standin = stack(**SMALL)
    other = Client.from_config(config, name="elsewhere", role="nodegroup")
    try:
        # What a rank on another machine with this one's host name writes: its registration under the
        # same advertised host, its status with its own machine id (job and pid of no concern here).
        record = NodeGroupRecord(uid=UID, host=config.nodegroup.host, ports=[1, 2, 3, 4], node=socket.gethostname())
        status = ServiceStatus(state="idle", extra={"host": socket.gethostname(), "pid": 1, "job": "theirs",
                                                    "machine": "f" * 32})
        other.set(nodegroup_key(UID), record.encode(), config.nodegroup.liveness_ttl_s)
        other.set(status_key("nodegroup", UID), status.encode(), config.kvstore.ttl_s)
        wait_until(lambda: [r.uid for r in standin.client.nodegroups()] == [UID], START_S, "the other registration")

        refused = start_job(processes, path, tmp_path / "out", ranks=1, name="refused")
        wait_until(lambda: refused.poll() is not None, START_S, "the job to be refused")
        assert refused.returncode != 0
        assert (f"sectorflow nodegroup: error: NodeGroup {UID} of another machine ({socket.gethostname()}, machine id "
                f"ffffffffffff) advertises the host {config.nodegroup.host!r} this rank would: two machines with one "
                "host name; set [nodegroup] host to an address of this node") in processes.output(refused)
        assert [r.uid for r in standin.client.nodegroups()] == [UID]
    finally:
        other.close()
    wait_until(lambda: not standin.client.nodegroups(), START_S, "the other machine's NodeGroup to leave")

    job = start_job(processes, path, tmp_path / "out", ranks=1, name="job")
    (mine,) = standin.wait_nodegroups(1, job, processes)
    assert mine.host == config.nodegroup.host and mine.uid != UID
