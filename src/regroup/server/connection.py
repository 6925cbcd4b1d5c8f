"""One client connection: a reader task that frames and decodes requests and starts a handler task for each,
and a writer task that sends the responses strictly in request order (Kafka clients match responses to
requests by order and correlation id).

Requests of one connection are handled concurrently — a JoinGroup parked for seconds does not stop a
pipelined Metadata behind it from being *computed* — but written in order; requests of different
connections never wait for each other. At most ``max_in_flight`` requests are outstanding per connection;
beyond that the reader stops reading (TCP back-pressure).

Anything the peer gets wrong (bad frame, unknown API, undecodable request) closes this connection only. On
end of stream or a reset the connection's outstanding handler tasks are cancelled: the core keeps whatever
it already did (a parked member stays until it rejoins or its session expires, as in Kafka) and the
response is simply never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from regroup.server.codec import decode_request
from regroup.server.dispatch import Dispatcher
from regroup.server.errors import ProtocolError, RequestDropped
from regroup.server.framing import DEFAULT_MAX_FRAME_BYTES, read_frame

log = logging.getLogger("regroup.server.connection")

DEFAULT_MAX_IN_FLIGHT = 64


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
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.dispatcher = dispatcher
        self.connection_id = connection_id
        self.max_frame_bytes = max_frame_bytes
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "?"
        self.client_host = peer[0] if isinstance(peer, tuple) and peer else ""
        self._responses: asyncio.Queue[asyncio.Task[bytes | None]] = asyncio.Queue(maxsize=max_in_flight)
        self._in_flight: set[asyncio.Task[bytes | None]] = set()

    async def serve(self) -> None:
        """Serve until the peer goes away, breaks the protocol, or the task is cancelled (shutdown)."""
        log.debug("connection %d from %s opened", self.connection_id, self.peer)
        reading = asyncio.create_task(self._read_requests(), name=f"conn-{self.connection_id}-read")
        writing = asyncio.create_task(self._write_responses(), name=f"conn-{self.connection_id}-write")
        try:
            done, _ = await asyncio.wait({reading, writing}, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                self._report(finished)
        finally:
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
            request = decode_request(data, self.dispatcher.versions)
            task = asyncio.create_task(
                self.dispatcher.respond(request, client_host=self.client_host, connection_id=self.connection_id)
            )
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)
            await self._responses.put(task)

    async def _write_responses(self) -> None:
        while True:
            task = await self._responses.get()
            data = await task
            if data is None:
                continue
            self.writer.write(data)
            await self.writer.drain()

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
