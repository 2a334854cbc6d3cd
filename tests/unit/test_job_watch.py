"""A rank watches the other ranks' registrations: gone after saying stopping is a clean leave, gone
without is a death (after a grace that a kvstore resync does not trip)."""

from __future__ import annotations

from sectorflow.consumer.nodegroup.job_watch import JobWatch
from sectorflow.protocol import ServiceStatus, nodegroup_key, status_key

TTL = 2.0
UIDS = [["n-r0-g0"], ["n-r1-g0", "n-r1-g1"]]


class Replica(dict):
    synced = True

    def get(self, key: str) -> bytes | None:  # type: ignore[override]
        return super().get(key)


def status(state: str) -> bytes:
    return ServiceStatus(state=state, scan=0, messages=0, bytes=0, extra={}).encode()


def registered(replica: Replica, uid: str, state: str = "idle") -> None:
    replica[nodegroup_key(uid)] = b"registration"
    replica[status_key("nodegroup", uid)] = status(state)


def watch(replica: Replica) -> JobWatch:
    return JobWatch(replica.get, lambda: replica.synced, UIDS, 0, TTL)


def test_a_rank_whose_registrations_vanish_while_it_says_it_works_died() -> None:
    replica = Replica()
    for uid in UIDS[1]:
        registered(replica, uid, "streaming")
    w = watch(replica)
    assert w.check(now=1e9) is None  # rank 0 is not watched; rank 1 is there
    del replica[nodegroup_key("n-r1-g1")]  # expired: its loop stopped refreshing it
    assert w.check(now=1e9 + TTL / 4) is None  # within the grace
    gone = w.check(now=1e9 + TTL)
    assert gone is not None and gone.died and gone.rank == 1 and w.dead_ranks() == {1}
    assert "rank 1's NodeGroups (n-r1-g0, n-r1-g1) vanished" in gone.describe()


def test_a_rank_that_says_stopping_left_cleanly() -> None:
    replica = Replica()
    for uid in UIDS[1]:
        registered(replica, uid)
    w = watch(replica)
    assert w.check(now=1e9) is None
    replica[status_key("nodegroup", "n-r1-g0")] = status("stopping")
    del replica[nodegroup_key("n-r1-g0")]
    gone = w.check(now=1e9)
    assert gone is not None and not gone.died and w.dead_ranks() == set()


def test_a_resyncing_replica_judges_nobody() -> None:
    replica = Replica()
    for uid in UIDS[1]:
        registered(replica, uid)
    w = watch(replica)
    assert w.check(now=1e9) is None
    replica.clear()  # a restarted kvstore server: every key gone until its owner writes it again
    replica.synced = False
    assert w.check(now=1e9 + 10 * TTL) is None
    replica.synced = True
    for uid in UIDS[1]:
        registered(replica, uid)
    assert w.check(now=1e9 + 10 * TTL + TTL / 4) is None
