"""A peer that tries one ZeroMQ handshake with a service and reports how it ended, from the
socket monitor's events (``from handshake import handshake``): what an outsider on the network
would see. Plain pyzmq, so that nothing of ours helps or hides the outcome."""

from __future__ import annotations

import time
from dataclasses import dataclass

import zmq
from zmq.utils.monitor import recv_monitor_message

SUCCEEDED = "succeeded"
REFUSED = "refused"
_FAILED = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
           | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_DISCONNECTED)


@dataclass(frozen=True)
class Curve:
    """The peer's CURVE: a client proving ``public``/``secret`` to a server of ``server_key``, or,
    with ``server_key`` None, a CURVE server holding ``secret``."""

    public: str
    secret: str
    server_key: str | None = None


def handshake(endpoint: str, socket_type: int, curve: Curve | None, timeout_s: float = 20.0) -> str:
    """Connect a ``socket_type`` socket to ``endpoint`` and return SUCCEEDED or REFUSED, by the first
    handshake event (a failed handshake, or a disconnection, is a refusal). Fails the caller with
    an AssertionError if neither comes within ``timeout_s`` (a guard, not a measurement)."""
    context = zmq.Context()
    try:
        peer = context.socket(socket_type)
        peer.linger = 0
        if curve is not None:
            if curve.server_key is None:
                peer.curve_server = True
                peer.curve_secretkey = curve.secret.encode()
            else:
                peer.curve_serverkey = curve.server_key.encode()
                peer.curve_publickey = curve.public.encode()
                peer.curve_secretkey = curve.secret.encode()
        monitor = peer.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | _FAILED)
        peer.connect(endpoint)
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            if not monitor.poll(left * 1000):
                break
            event = recv_monitor_message(monitor)["event"]
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                outcome = SUCCEEDED
            elif event & _FAILED:
                outcome = REFUSED
            else:
                continue
            peer.disable_monitor()
            monitor.close()
            peer.close()
            return outcome
        raise AssertionError(f"no handshake outcome with {endpoint} within {timeout_s} s")
    finally:
        context.destroy(linger=0)
