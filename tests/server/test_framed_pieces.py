"""A large pre-encoded answer of few pieces (an all-topics Metadata kept between requests) is framed in pieces
(``framing.FramedPieces``, ``dispatch.PIECES_FROM_BYTES``, ``PIECES_AT_MOST``) and written to the socket as they
are, never joined into one bytes object on the loop: the client reads the same bytes as from the joined frame, in
order with the answers around it on the connection."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest
import uvloop
from kio.index import load_response_schema

from regroup.network.codec import DecodedRequest, frame_response
from regroup.network.connection import Connection
from regroup.network.framing import FramedPieces
from regroup.server.dispatch import PIECES_AT_MOST, PIECES_FROM_BYTES, _encode
from regroup.server.encoded import PreEncoded
from tests.server.wire import encode_request

API_VERSIONS = 18


def test_a_large_body_is_framed_in_its_own_pieces_and_a_small_one_joined() -> None:
    cls = load_response_schema(3, 12)  # (Metadata v12)
    big = (b"a" * 10, b"b" * PIECES_FROM_BYTES, b"c" * 3)
    framed = _encode(7, PreEncoded(cls, big, ()))
    assert isinstance(framed, FramedPieces)
    assert all(mine is theirs for mine, theirs in zip(framed.pieces[1:], big, strict=True))  # (not copied)
    assert framed.joined() == frame_response(7, cls, big) and len(framed) == len(framed.joined())
    small = (b"a" * 10, b"b" * (PIECES_FROM_BYTES - 100))
    assert _encode(7, PreEncoded(cls, small, ())) == frame_response(7, cls, small)
    many = tuple(b"d" * (PIECES_FROM_BYTES // PIECES_AT_MOST + 1) for _ in range(PIECES_AT_MOST + 1))
    assert _encode(7, PreEncoded(cls, many, ())) == frame_response(7, cls, many)  # (joined: too many pieces)


class PiecesOrBytes:
    """Answers odd correlation ids with a frame in pieces, even ones with the same frame joined."""

    def __init__(self) -> None:
        self.versions = {API_VERSIONS: (0, 3)}
        self.limits: dict[int, Any] = {}

    async def respond(
        self, request: DecodedRequest, *, client_host: str, connection_id: int, session: Any = None
    ) -> bytes | FramedPieces | None:
        return answer(request.correlation_id) if request.correlation_id % 2 else answer(request.correlation_id).joined()


def answer(correlation_id: int) -> FramedPieces:
    body = bytes([correlation_id % 256]) * 300_000
    head = (len(body) + 4).to_bytes(4, "big") + correlation_id.to_bytes(4, "big")
    return FramedPieces((head, body[:100_000], body[100_000:]), len(head) + len(body))


@pytest.mark.parametrize("new_loop", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_answers_in_pieces_and_whole_reach_the_client_in_order(
    new_loop: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    ready, stop = threading.Event(), threading.Event()
    port: list[int] = []

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Connection(PiecesOrBytes(), 1), "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.01)
        server.close()

    def run() -> None:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            runner.run(serve())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        with socket.create_connection(("127.0.0.1", port[0]), timeout=10) as sock:
            # pipelined: answered in one turn, pieces and whole frames written together
            sock.sendall(b"".join(encode_request(API_VERSIONS, 0, c, "c") for c in range(1, 7)))
            received = b""
            expected = b"".join(answer(c).joined() for c in range(1, 7))
            while len(received) < len(expected):
                chunk = sock.recv(1 << 20)
                assert chunk, "closed"
                received += chunk
    finally:
        stop.set()
        thread.join(10)
    assert received == expected
