"""A request whose handler suspends and then fails (a parked JoinGroup superseded by a newer one: the
connection is closed) leaves no task error unread: asyncio logs "Task exception was never retrieved" for the
continuation task of such a request once the task is freed, whenever the collector gets to it, unless the
connection marks the error read (``Connection._finished``)."""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

from regroup.network.codec import DecodedRequest
from regroup.network.connection import Connection
from regroup.network.errors import CloseConnection
from tests.server.wire import encode_request

API_VERSIONS = 18


class ParkThenFail:
    """A responder whose answer parks until ``release`` is set, then fails closing the connection."""

    def __init__(self) -> None:
        self.versions = {API_VERSIONS: (0, 3)}
        self.limits: dict[int, Any] = {}
        self.release = asyncio.Event()
        self.parked = asyncio.Event()

    async def respond(
        self, request: DecodedRequest, *, client_host: str, connection_id: int, session: Any = None
    ) -> bytes | None:
        self.parked.set()
        await self.release.wait()
        raise CloseConnection("request superseded")


def test_a_parked_request_that_fails_leaves_no_task_error_unread() -> None:
    unread: list[dict[str, Any]] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: unread.append(context))
        responder = ParkThenFail()
        server = await loop.create_server(lambda: Connection(responder, 1), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        try:
            client.sendall(encode_request(API_VERSIONS, 0, 1, "c"))
            await asyncio.wait_for(responder.parked.wait(), 5)
            responder.release.set()
            client.setblocking(False)
            for _ in range(200):  # until the server closed the connection
                await asyncio.sleep(0.01)
                try:
                    if client.recv(1024) == b"":
                        break
                except BlockingIOError:
                    continue
            else:
                raise AssertionError("the connection was not closed")
        finally:
            client.close()
            server.close()
            await server.wait_closed()
        for _ in range(3):
            gc.collect()
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert [c.get("message") for c in unread] == []
