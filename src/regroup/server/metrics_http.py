"""The ``--metrics-port`` endpoint: a minimal HTTP/1.1 server on the server's own event loop that answers
``GET /metrics`` (and ``HEAD``) with the Prometheus text exposition, 404 for other paths, 405 for other
methods, 400 for anything that is not an HTTP request head. One request per connection
(``Connection: close``); a request head larger than ``MAX_HEAD_BYTES`` or slower than ``HEAD_TIMEOUT_S``
closes the connection. Scrapes never touch the Kafka listener."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("regroup.server.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT_S = 10.0

Scrape = Callable[[], Awaitable[str]]


class MetricsEndpoint:
    """Serves ``scrape()``'s text; ``start()`` listens (raises ``OSError``), ``close()`` stops."""

    def __init__(self, scrape: Scrape, host: str, port: int) -> None:
        self._scrape = scrape
        self.host = host
        self.port = port
        self._listener: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._listener = await asyncio.start_server(
            self._on_client, self.host, self.port, reuse_address=True, limit=MAX_HEAD_BYTES
        )
        self.port = self._listener.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for task in list(self._clients):
            task.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.wait_closed()
            self._listener = None

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            status, body, head_only = await self._answer(reader)
            if status:
                writer.write(_response(status, body, head_only))
                await writer.drain()
        except asyncio.CancelledError:
            pass  # shutdown
        except (ConnectionError, OSError) as exc:
            log.debug("metrics client lost: %s", exc)
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[str, bytes, bool]:
        """(status line text or "" to just close, body, whether the body is left out)."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            return "", b"", False
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return "400 Bad Request", b"bad request\n", False
        method, target = parts[0], parts[1]
        if target.split("?", 1)[0] != "/metrics":
            return "404 Not Found", b"only /metrics is served here\n", method == "HEAD"
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", b"GET or HEAD\n", False
        return "200 OK", (await self._scrape()).encode(), method == "HEAD"


def _response(status: str, body: bytes, head_only: bool) -> bytes:
    content_type = CONTENT_TYPE if status.startswith("200") else "text/plain; charset=utf-8"
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        + ("Allow: GET, HEAD\r\n" if status.startswith("405") else "")
        + "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + (b"" if head_only else body)
