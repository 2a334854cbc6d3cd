"""What the kernel says of a LiberTEM client's TCP connection (libertem_bridge/SPEC.md, "Clients"):
the account that owns the client's end, and the bytes that reached it unread. LiberTEM-live's
asi_tpx3 client sends not one byte (no key, no token), so on this host the owner of its socket is
the one credential it carries; and TCP says a byte arrived, never that it was read, so "read" is
what left both ends' kernel buffers.

Linux only: the client's end is looked up with NETLINK_SOCK_DIAG (what ``ss`` reads), by its
exact address pair, in this network namespace."""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
import threading
from dataclasses import dataclass

from sectorflow.errors import SectorflowError

# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_REQUEST = struct.Struct("=BBBxI")  # family, protocol, extensions, pad, states
_SOCKET_ID = struct.Struct("!HH16s16s")  # source port, destination port, addresses (big-endian)
_SOCKET_ID_TAIL = struct.Struct("=III")  # interface, cookie (two words)
_NO_COOKIE = 0xFFFFFFFF
_MESSAGE_HEAD = struct.Struct("=BBBB")  # family, state, timer, retransmits
_MESSAGE_TAIL = struct.Struct("=IIIII")  # expires, receive queue, send queue, uid, inode
_REPLY_WAIT_S = 1.0  # the kernel answers at once; a bound so that nothing here can hang


@dataclass(frozen=True)
class PeerEnd:
    """The client's end of a connection, as its kernel holds it."""

    uid: int  # the account that owns the socket
    unread: int  # bytes that reached it and its program has not read


class SocketTable:
    """Looks up the client's end of a connection in this host's socket table.

    :raises SectorflowError: the kernel refuses sock_diag (the message says what that costs).
    """

    def __init__(self) -> None:
        try:
            self._netlink = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
        except (OSError, AttributeError) as error:
            raise SectorflowError(f"cannot read this host's socket table (NETLINK_SOCK_DIAG: {error}): the LiberTEM "
                                  f"bridge needs it to know who a client is and what it read") from None
        self._netlink.settimeout(_REPLY_WAIT_S)
        self._lock = threading.Lock()
        self._sequence = 0

    def peer_end(self, connection: socket.socket) -> PeerEnd | None:
        """The client's end of ``connection`` (an accepted socket); None when it is not on this
        host (or in another namespace), or has gone."""
        try:
            ours = connection.getsockname()
            theirs = connection.getpeername()
        except OSError:
            return None
        family = connection.family
        sockid = _SOCKET_ID.pack(theirs[1], ours[1], _address(family, theirs[0]), _address(family, ours[0])) + \
            _SOCKET_ID_TAIL.pack(0, _NO_COOKIE, _NO_COOKIE)
        request = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0xFFFFFFFF) + sockid
        with self._lock:
            self._sequence += 1
            header = _NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST,
                                        self._sequence, 0)
            try:
                self._netlink.send(header + request)
                reply = self._netlink.recv(65536)
            except OSError:
                return None
        _, kind, _, _, _ = _NLMSG_HEADER.unpack_from(reply)
        if kind == _NLMSG_ERROR or len(reply) < _NLMSG_HEADER.size + _MESSAGE_HEAD.size + 48 + _MESSAGE_TAIL.size:
            return None  # not found: not this host's, or closed
        _, unread, _, uid, _ = _MESSAGE_TAIL.unpack_from(reply, _NLMSG_HEADER.size + _MESSAGE_HEAD.size + 48)
        return PeerEnd(uid=uid, unread=unread)

    def close(self) -> None:
        self._netlink.close()


def unsent(connection: socket.socket) -> int:
    """Bytes written to ``connection`` that its peer's kernel has not acknowledged (still ours)."""
    try:
        return struct.unpack("i", fcntl.ioctl(connection.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    except (OSError, ValueError):
        return 0  # closed: what it held is counted by whoever closed it


def _address(family: int, host: str) -> bytes:
    return socket.inet_pton(family, host.partition("%")[0]).ljust(16, b"\0")
