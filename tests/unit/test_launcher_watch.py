"""consumer/nodegroup/launcher_watch.py on real sockets: the launcher's end closing is seen, nothing else is."""

from __future__ import annotations

import socket

from sectorflow.consumer.nodegroup.launcher_watch import LauncherWatch


def test_a_rank_sees_its_launchers_end_of_the_pmi_connection_close_and_nothing_before() -> None:
    rank_end, launcher_end = socket.socketpair()
    with rank_end, launcher_end:
        watch = LauncherWatch({"PMI_FD": str(rank_end.fileno())})
        assert watch.fd == rank_end.fileno() and not watch.gone()
        launcher_end.sendall(b"cmd=barrier_out\n")  # PMI traffic for MPI to read: not a hang-up
        assert not watch.gone()
        assert rank_end.recv(64) == b"cmd=barrier_out\n"  # and left for MPI to read
        launcher_end.close()
        assert watch.gone()


def test_no_connection_to_watch_is_never_gone(tmp_path) -> None:
    assert not LauncherWatch({}).gone()
    path = tmp_path / "not-a-socket"
    path.write_text("")
    with open(path) as file:
        watch = LauncherWatch({"PMI_FD": str(file.fileno())})
        assert watch.fd is None and not watch.gone()
    assert not LauncherWatch({"PMI_FD": "not a number"}).gone()
