"""A minimal HTTP/1.1 server on the server's own event loop: reads one request head per connection (at most
``MAX_HEAD_BYTES``, within ``HEAD_TIMEOUT_S``), answers GET and HEAD through a handler, and closes the connection
(``Connection: close``: no keep-alive). A head too large, too slow or cut short closes the connection without an
answer; one that is not an HTTP/1.x request head is a 400; another method is a 405; at most ``max_clients``
connections are served at once, the next ones get a 503. ``POST`` is accepted only on the paths ``accepts_post``
allows, with a body of at most ``MAX_BODY_BYTES`` announced by ``Content-Length`` (none: 411; larger: 413; a
chunked body: 411) and read within the same ``HEAD_TIMEOUT_S`` (too slow or cut short: closed without an
answer). A handler that raises is a 500 with a one-line body: any bytes a client sends end in an answer or a
closed connection, never in a traceback sent back.

A handler answers with a ``Response`` (a body known in full) or a ``Stream`` (a body written as its chunks come,
for Server-Sent Events); a client too slow to take what is written within ``WRITE_TIMEOUT_S`` is dropped."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = ["HttpServer", "Request", "Response", "Stream", "text"]

log = logging.getLogger("regroup.console.http")

MAX_HEAD_BYTES: Final = 16 * 1024
MAX_HEADERS: Final = 100
MAX_BODY_BYTES: Final = 16 * 1024
HEAD_TIMEOUT_S: Final = 10.0
WRITE_TIMEOUT_S: Final = 10.0
DEFAULT_MAX_CLIENTS: Final = 256

REASONS: Final = {
    200: "OK",
    202: "Accepted",
    304: "Not Modified",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    #: the path as sent (still percent-encoded), without the query
    path: str
    #: the query's parameters (the last value of each name), decoded
    query: Mapping[str, str]
    #: header names lower-cased (the last value of each name)
    headers: Mapping[str, str]
    #: a POST's body (empty for GET and HEAD)
    body: bytes = b""

    @property
    def head_only(self) -> bool:
        return self.method == "HEAD"


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Stream:
    """A 200 whose body is ``chunks``, written as they come until the iterator ends or the client goes."""

    chunks: AsyncIterator[bytes]
    content_type: str
    headers: tuple[tuple[str, str], ...] = field(default=())


Handler = Callable[[Request], Awaitable[Response | Stream]]
#: whether a path takes POST requests
PostPaths = Callable[[str], bool]


def text(status: int, message: str, *headers: tuple[str, str]) -> Response:
    """A plain-text answer of one line."""
    return Response(status, (message + "\n").encode(), headers=headers)


class HttpServer:
    """``start()`` listens (raises ``OSError``; ``port`` is then the port bound), ``close()`` stops and drops
    every connection."""

    def __init__(
        self,
        handler: Handler,
        host: str,
        port: int,
        *,
        max_clients: int = DEFAULT_MAX_CLIENTS,
        head_timeout_s: float = HEAD_TIMEOUT_S,
        write_timeout_s: float = WRITE_TIMEOUT_S,
        accepts_post: PostPaths | None = None,
    ) -> None:
        self._handler = handler
        self._accepts_post = accepts_post
        self.host = host
        self.port = port
        self._max_clients = max_clients
        self._head_timeout_s = head_timeout_s
        self._write_timeout_s = write_timeout_s
        self._listener: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

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
        busy = len(self._clients) >= self._max_clients
        self._clients.add(task)
        try:
            if busy:
                await self._write(writer, _head(503, "text/plain; charset=utf-8", 5) + b"busy\n")
            else:
                await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # shutdown
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.debug("http client lost: %r", exc)
        except Exception:  # a bug in a handler: the client gets a closed connection, the log the trace
            log.exception("http request failed")
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self._head_timeout_s)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            return
        request = parse_head(head)
        if request is None:
            await self._write(writer, _whole(text(400, "bad request"), False))
            return
        if request.method == "POST" and self._accepts_post is not None and self._accepts_post(request.path):
            refused = _body_refused(request)
            if refused is not None:
                await self._write(writer, _whole(refused, False))
                return
            length = int(request.headers["content-length"])
            if request.headers.get("expect", "").lower() == "100-continue" and length:
                await self._write(writer, b"HTTP/1.1 100 Continue\r\n\r\n")
            try:
                body = await asyncio.wait_for(reader.readexactly(length), self._head_timeout_s)
            except (asyncio.IncompleteReadError, TimeoutError):
                return
            request = dataclasses.replace(request, body=body)
        elif request.method not in ("GET", "HEAD"):
            await self._write(writer, _whole(text(405, "GET or HEAD", ("Allow", "GET, HEAD")), False))
            return
        try:
            answer = await self._handler(request)
        except Exception:
            log.exception("http handler failed for %s %s", request.method, request.path[:200])
            answer = text(500, "internal error")
        if isinstance(answer, Response):
            await self._write(writer, _whole(answer, request.head_only))
            return
        chunks = answer.chunks
        try:
            await self._write(writer, _head(200, answer.content_type, None, answer.headers))
            if request.head_only:
                return
            async for chunk in chunks:
                await self._write(writer, chunk)
        finally:
            closing = getattr(chunks, "aclose", None)
            if closing is not None:
                with contextlib.suppress(Exception):
                    await closing()

    async def _write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await asyncio.wait_for(writer.drain(), self._write_timeout_s)


def parse_head(head: bytes) -> Request | None:
    """The request a head (request line and header lines, ``\\r\\n``-separated) says, or None if it is not an
    HTTP/1.x request head."""
    try:
        lines = head.decode("latin-1").split("\r\n")
    except UnicodeDecodeError:  # (latin-1 decodes every byte: kept for clarity)
        return None
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        return None
    method, target = parts[0], parts[1]
    if not method.isalpha() or not method.isupper() or not target.startswith("/"):
        return None
    if any(ord(c) < 0x21 or ord(c) > 0x7E for c in target):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or len(headers) >= MAX_HEADERS:
            return None
        headers[name.lower()] = value.strip()
    path, _, query = target.partition("?")
    try:
        params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True, errors="strict"))
    except (ValueError, UnicodeDecodeError):
        return None
    return Request(method, path, params, headers)


def _body_refused(request: Request) -> Response | None:
    """Why a POST's body is not read (None: ``Content-Length`` says a length within ``MAX_BODY_BYTES``)."""
    if "transfer-encoding" in request.headers:
        return text(411, "a body needs a Content-Length (no chunked bodies)")
    raw = request.headers.get("content-length")
    if raw is None:
        return text(411, "a body needs a Content-Length")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
        return text(400, "bad Content-Length")
    if int(raw) > MAX_BODY_BYTES:
        return text(413, f"a body is at most {MAX_BODY_BYTES} bytes")
    return None


def _head(status: int, content_type: str, length: int | None, headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}", f"Content-Type: {content_type}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines.extend(f"{name}: {value}" for name, value in headers)
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _whole(response: Response, head_only: bool) -> bytes:
    head = _head(response.status, response.content_type, len(response.body), response.headers)
    return head if head_only else head + response.body
