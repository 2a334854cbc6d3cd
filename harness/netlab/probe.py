"""Small network probes run inside a namespace (``python -m harness.netlab.probe ...``): what the
netlab tests use to see the WAN's round trip and loss from the hosts' side.

    tcp-listen ADDR PORT          accept and close connections until killed; prints "listening"
    tcp-connect ADDR PORT         prints the seconds one TCP connect took (one round trip)
    udp-sink ADDR PORT            counts datagrams; prints "bound", then the count once stdin closes
    udp-send ADDR PORT COUNT      sends COUNT numbered 200-byte datagrams
    tcp-sink ADDR PORT            reads one connection to its end; prints "listening", then bytes/s
    tcp-source ADDR PORT SECONDS  one TCP stream, as fast as it goes, for SECONDS
"""

from __future__ import annotations

import socket
import sys
import time

DATAGRAM_BYTES = 200
SINK_BUFFER_BYTES = 16 * 1024 * 1024
SO_RCVBUFFORCE = 33  # Linux's <asm-generic/socket.h>; Python's socket module does not name it


def tcp_listen(address: str, port: int) -> None:
    with socket.create_server((address, port)) as server:
        print("listening", flush=True)
        while True:
            connection, _ = server.accept()
            connection.close()


def tcp_connect(address: str, port: int) -> None:
    started = time.perf_counter()
    with socket.create_connection((address, port), timeout=30):
        elapsed = time.perf_counter() - started
    print(f"{elapsed:.6f}", flush=True)


def udp_sink(address: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:
        # As root, beyond rmem_max: no datagram may be lost in the sink itself.
        sink.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, SINK_BUFFER_BYTES)
        sink.bind((address, port))
        print("bound", flush=True)
        sys.stdin.read()  # the test closes stdin once the delay line has released everything
        sink.setblocking(False)
        count = 0
        while True:
            try:
                sink.recv(65536)
            except BlockingIOError:
                break
            count += 1
    print(count, flush=True)


def udp_send(address: str, port: int, count: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for number in range(count):
            sender.sendto(number.to_bytes(8, "big").ljust(DATAGRAM_BYTES, b"\0"), (address, port))


def tcp_sink(address: str, port: int) -> None:
    with socket.create_server((address, port)) as server:
        print("listening", flush=True)
        connection, _ = server.accept()
        with connection:
            received, started = 0, time.perf_counter()
            while chunk := connection.recv(1 << 20):
                received += len(chunk)
            elapsed = time.perf_counter() - started
    print(f"{received / elapsed:.0f}", flush=True)


def tcp_source(address: str, port: int, seconds: int) -> None:
    block = bytes(1 << 20)
    with socket.create_connection((address, port), timeout=30) as stream:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            stream.sendall(block)


def main(argv: list[str]) -> int:
    commands = {"tcp-listen": tcp_listen, "tcp-connect": tcp_connect, "udp-sink": udp_sink, "udp-send": udp_send,
                "tcp-sink": tcp_sink, "tcp-source": tcp_source}
    if len(argv) < 3 or argv[0] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    command, address, *numbers = argv
    commands[command](address, *(int(n) for n in numbers))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
