"""Socket buffers above the kernel's ceiling are said once, with what the kernel grants."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from sectorflow.socket_buffers import granted_bytes, warn_if_capped


def test_granted_bytes_is_what_this_kernel_gives_a_socket() -> None:
    wanted = 1 << 30  # far above any default net.core.wmem_max
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, wanted)  # as ZeroMQ sets ZMQ_SNDBUF
        assert granted_bytes(wanted, "wmem_max") == probe.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


def test_a_buffer_above_the_ceiling_is_logged_once_with_the_value_obtained(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "rmem_max").write_text("212992\n")
    with caplog.at_level(logging.WARNING):
        message = warn_if_capped("[nodegroup] rcvbuf_bytes", 8 << 20, "rmem_max", tmp_path)
    assert message == ("[nodegroup] rcvbuf_bytes = 8388608 is above this host's net.core.rmem_max = 212992: each "
                       "socket gets 425984 bytes (the kernel's double of its ceiling) and no autotuning; raise "
                       "net.core.rmem_max (docs/deployment.md, 'Long fat links') or lower the setting")
    assert [r.getMessage() for r in caplog.records] == [message]


def test_a_buffer_within_the_ceiling_or_autotuned_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "wmem_max").write_text("16777216\n")
    assert warn_if_capped("[aggregator] sndbuf_bytes", 4 << 20, "wmem_max", tmp_path) is None
    assert warn_if_capped("[aggregator] sndbuf_bytes", 0, "wmem_max", tmp_path) is None
    assert warn_if_capped("[aggregator] sndbuf_bytes", 4 << 20, "wmem_max", tmp_path / "absent") is None
