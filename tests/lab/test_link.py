"""The relay a real validation run puts between its members and ``regroup serve`` (lab/link.py): every
chunk is held for the one-way latency (plus jitter) in each direction, bytes arrive complete and in order,
and a close on either side reaches the other."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from regroup.lab.link import DelayLink


@pytest.fixture
def echo_port() -> Iterator[int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def test_a_round_trip_takes_twice_the_latency(echo_port: int) -> None:
    link = DelayLink(echo_port, latency_ms=30).start()
    try:
        with socket.create_connection(("127.0.0.1", link.port)) as sock:
            for _ in range(3):
                started = time.monotonic()
                sock.sendall(b"ping")
                assert _read(sock, 4) == b"ping"
                elapsed = time.monotonic() - started
                assert elapsed >= 0.060  # one latency each way, never less
                assert elapsed < 2.0  # (a generous bound: the machine may be busy)
    finally:
        link.close()


def test_bytes_arrive_complete_and_in_order_despite_jitter(echo_port: int) -> None:
    link = DelayLink(echo_port, latency_ms=1, jitter_ms=20, seed=7).start()
    payload = b"".join(i.to_bytes(4, "big") for i in range(20_000))
    try:
        with socket.create_connection(("127.0.0.1", link.port)) as sock:
            for start in range(0, len(payload), 997):  # many small writes: many chunks, each drawn a delay
                sock.sendall(payload[start : start + 997])
            assert _read(sock, len(payload)) == payload
    finally:
        link.close()


def test_a_closed_upstream_closes_the_client_side(echo_port: int) -> None:
    link = DelayLink(echo_port, latency_ms=5).start()
    try:
        with socket.create_connection(("127.0.0.1", link.port)) as sock:
            sock.sendall(b"x")
            assert _read(sock, 1) == b"x"
            sock.shutdown(socket.SHUT_WR)  # the echo server sees the end and closes; so must the relay
            sock.settimeout(5)
            assert sock.recv(1) == b""
    finally:
        link.close()


def test_nothing_listening_upstream_closes_the_connection() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    link = DelayLink(dead_port, latency_ms=5).start()
    try:
        with socket.create_connection(("127.0.0.1", link.port)) as sock:
            sock.settimeout(5)
            assert sock.recv(1) == b""
    finally:
        link.close()


def _upstream_sees_the_end(hold_open: bool) -> bool:
    """Whether a server behind the relay sees the end of a connection whose client closed."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    link = DelayLink(listener.getsockname()[1], latency_ms=2, hold_open=hold_open).start()
    try:
        client = socket.create_connection(("127.0.0.1", link.port))
        conn, _ = listener.accept()
        with conn:
            client.sendall(b"x")
            client.close()
            conn.settimeout(0.5)
            assert conn.recv(1) == b"x"
            try:
                return conn.recv(1) == b""
            except TimeoutError:
                return False
    finally:
        link.close()
        listener.close()


def test_a_held_open_link_leaves_the_server_side_open_when_the_client_goes() -> None:
    """A host that vanished: its process is gone, its connections stay open at the server (``hold_open``)."""
    assert _upstream_sees_the_end(hold_open=False)
    assert not _upstream_sees_the_end(hold_open=True)
