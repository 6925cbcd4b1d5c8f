"""One client connection: a reader task that frames and decodes requests and starts a handler task for each,
and a writer task that sends the responses strictly in request order (Kafka clients match responses to
requests by order and correlation id); responses of pipelined requests that are ready together go out in
one write.

Requests of one connection are handled concurrently — a JoinGroup parked for seconds does not stop a
pipelined Metadata behind it from being *computed* — but written in order; requests of different
connections never wait for each other. At most ``max_in_flight`` requests are outstanding per connection;
beyond that the reader stops reading (TCP back-pressure).

A connection idle for ``max_idle_ms`` (Kafka's ``connections.max.idle.ms``: no request read and no response
written, and no request outstanding — a JoinGroup parked for a long rebalance keeps its connection) is
closed. One timer per connection checks it; activity only moves a timestamp, the timer re-arms itself for
the remainder when it fires.

Anything the peer gets wrong (bad frame, unknown API, undecodable request) closes this connection only. On
end of stream or a reset the connection's outstanding handler tasks are cancelled: the core keeps whatever
it already did (a parked member stays until it rejoins or its session expires, as in Kafka) and the
response is simply never written.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Any

from regroup.server.codec import decode_request
from regroup.server.dispatch import Dispatcher
from regroup.server.errors import ProtocolError, RequestDropped
from regroup.server.framing import DEFAULT_MAX_FRAME_BYTES, read_frame

log = logging.getLogger("regroup.server.connection")

DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_MAX_IDLE_MS = 600_000


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        dispatcher: Dispatcher,
        connection_id: int,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_idle_ms: int = DEFAULT_MAX_IDLE_MS,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.dispatcher = dispatcher
        self.connection_id = connection_id
        self.max_frame_bytes = max_frame_bytes
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "?"
        self.client_host = peer[0] if isinstance(peer, tuple) and peer else ""
        self._responses = _InOrder(max_in_flight)
        self._in_flight: set[asyncio.Task[bytes | None]] = set()
        self._max_idle_s = max_idle_ms / 1000
        self._loop = asyncio.get_running_loop()
        self._last_active = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._reading: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        """Serve until the peer goes away, breaks the protocol, or the task is cancelled (shutdown)."""
        log.debug("connection %d from %s opened", self.connection_id, self.peer)
        reading = asyncio.create_task(self._read_requests(), name=f"conn-{self.connection_id}-read")
        writing = asyncio.create_task(self._write_responses(), name=f"conn-{self.connection_id}-write")
        self._reading = reading
        self._idle_timer = self._loop.call_later(self._max_idle_s, self._check_idle)
        try:
            done, _ = await asyncio.wait({reading, writing}, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                self._report(finished)
        finally:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            for task in (reading, writing, *self._in_flight):
                task.cancel()
            await asyncio.gather(reading, writing, *self._in_flight, return_exceptions=True)
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
            log.debug("connection %d from %s closed", self.connection_id, self.peer)

    async def _read_requests(self) -> None:
        while True:
            data = await read_frame(self.reader, self.max_frame_bytes)
            if data is None:
                return
            self._last_active = self._loop.time()
            request = decode_request(data, self.dispatcher.versions)
            task = asyncio.create_task(
                self.dispatcher.respond(request, client_host=self.client_host, connection_id=self.connection_id)
            )
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)
            await self._responses.put(task)

    async def _write_responses(self) -> None:
        responses = self._responses
        while True:
            task = await responses.get()
            data = await task
            chunks = [] if data is None else [data]
            # responses already computed behind it (pipelined requests) go out in the same write
            while (done := responses.take_done()) is not None:
                try:
                    data = done.result()
                except BaseException:
                    if chunks:
                        self.writer.write(b"".join(chunks))
                    raise
                if data is not None:
                    chunks.append(data)
            if chunks:
                self.writer.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
                await self.writer.drain()
                self._last_active = self._loop.time()

    def _check_idle(self) -> None:
        """The idle timer: close the connection, or re-arm for whatever is left of the idle period."""
        now = self._loop.time()
        if self._in_flight or self._responses.pending():
            self._last_active = now  # waiting on us is not idleness
        left = self._last_active + self._max_idle_s - now
        if left > 0:
            self._idle_timer = self._loop.call_later(left, self._check_idle)
            return
        log.info(
            "closing connection %d from %s: idle for more than %d ms",
            self.connection_id,
            self.peer,
            round(self._max_idle_s * 1000),
        )
        if self._reading is not None:
            self._reading.cancel()

    def _report(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if isinstance(exc, ProtocolError | RequestDropped):
            log.info("closing connection %d from %s: %s", self.connection_id, self.peer, exc)
        elif isinstance(exc, ConnectionError | OSError):
            log.debug("connection %d from %s lost: %s", self.connection_id, self.peer, exc)
        else:
            log.error(
                "closing connection %d from %s after an unexpected error", self.connection_id, self.peer, exc_info=exc
            )


class _InOrder:
    """A connection's handler tasks in request order: a bounded FIFO with ``asyncio.Queue(maxsize)``'s
    semantics for its one producer (``put`` waits while it is full) and one consumer (``get`` waits while it is
    empty), plus ``take_done`` so the writer can take every finished task at the head without waiting."""

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._items: collections.deque[asyncio.Task[bytes | None]] = collections.deque()
        self._getter: asyncio.Future[None] | None = None
        self._putter: asyncio.Future[None] | None = None

    def _full(self) -> bool:
        return 0 < self._maxsize <= len(self._items)

    async def put(self, task: asyncio.Task[bytes | None]) -> None:
        while self._full():
            self._putter = asyncio.get_running_loop().create_future()
            await self._putter
        self._items.append(task)
        getter = self._getter
        if getter is not None and not getter.done():
            getter.set_result(None)

    async def get(self) -> asyncio.Task[bytes | None]:
        while not self._items:
            self._getter = asyncio.get_running_loop().create_future()
            await self._getter
        return self._take()

    def pending(self) -> bool:
        return bool(self._items)

    def take_done(self) -> asyncio.Task[bytes | None] | None:
        """The head task if it has finished (removed), else None."""
        if self._items and self._items[0].done():
            return self._take()
        return None

    def _take(self) -> asyncio.Task[bytes | None]:
        task = self._items.popleft()
        putter = self._putter
        if putter is not None and not putter.done():
            putter.set_result(None)
        return task
