"""``console/http.py`` in process: a handler that raises is a 500 with a one-line body (the trace goes to the
log, not to the client); a stream whose client goes away is closed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from regroup.console.http import HttpServer, Request, Response, Stream


async def fetch(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


def test_a_failing_handler_is_a_500_and_the_server_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    async def handler(request: Request) -> Response | Stream:
        if request.path == "/boom":
            raise RuntimeError("secret internals")
        return Response(200, b"fine\n")

    async def scenario() -> None:
        server = HttpServer(handler, "127.0.0.1", 0)
        await server.start()
        try:
            boom = await fetch(server.port, b"GET /boom HTTP/1.1\r\n\r\n")
            assert boom.startswith(b"HTTP/1.1 500 Internal Server Error\r\n") and boom.endswith(
                b"\r\n\r\ninternal error\n"
            )
            assert b"secret" not in boom and b"Traceback" not in boom
            assert (await fetch(server.port, b"GET /x HTTP/1.0\r\n\r\n")).endswith(b"\r\n\r\nfine\n")
        finally:
            await server.close()

    with caplog.at_level(logging.ERROR, "regroup.console.http"):
        asyncio.run(scenario())
    assert "secret internals" in caplog.text  # (the log has it)


def test_a_stream_is_closed_when_its_client_goes() -> None:
    async def scenario() -> None:
        ended = asyncio.Event()

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while True:
                    yield b"data: x\n\n"
                    await asyncio.sleep(0.01)
            finally:
                ended.set()

        async def handler(request: Request) -> Response | Stream:
            return Stream(chunks(), "text/event-stream")

        server = HttpServer(handler, "127.0.0.1", 0)
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"GET /s HTTP/1.1\r\n\r\n")
            assert (await reader.readuntil(b"data: x\n\n")).startswith(b"HTTP/1.1 200 OK\r\n")
            writer.close()
            await asyncio.wait_for(ended.wait(), 10)
        finally:
            await server.close()

    asyncio.run(scenario())
