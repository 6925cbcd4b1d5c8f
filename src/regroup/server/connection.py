"""One client connection, as an ``asyncio.Protocol``: frames are cut from the received bytes in
``data_received``, each request is decoded and its handler started eagerly (``server/eager.py``), and the
responses are written with ``transport.write`` strictly in request order (Kafka clients match responses to
requests by order and correlation id).

* **Synchronous path.** A request whose handler finishes without suspending (Heartbeat, Metadata,
  ApiVersions, ...) is answered inside ``data_received``: no task, no event-loop round trip. Responses of
  all the requests that one read brought in go out in one write.
* **Parked or durable requests.** A handler that suspends (a JoinGroup parked for seconds, a commit waiting
  for its append) finishes in a task; requests behind it are still *computed* at once, but their responses
  wait in a per-connection FIFO until everything before them is written. Requests of different connections
  never wait for each other.
* **Back-pressure.** At most ``max_in_flight`` responses may wait per connection, and nothing is read while
  the transport's write buffer is above its high-water mark; in both cases the connection stops reading
  (TCP back-pressure) and carries on with the frames already buffered when it resumes.
* **Idleness.** A connection idle for ``max_idle_ms`` (Kafka's ``connections.max.idle.ms``: no bytes read,
  no response written, and no request outstanding — a JoinGroup parked for a long rebalance keeps its
  connection) is closed. One timer per connection checks it; activity only moves a timestamp, and the timer
  re-arms itself for the remainder when it fires.

Anything the peer gets wrong (bad frame, unknown API, undecodable request) closes this connection only, after
the responses already complete in front of it are written. On end of stream or a reset the connection's
outstanding handler tasks are cancelled: the core keeps whatever it already did (a parked member stays until
it rejoins or its session expires, as in Kafka) and the response is simply never written.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Callable

from regroup.server.codec import decode_request
from regroup.server.dispatch import Dispatcher
from regroup.server.eager import Started, start
from regroup.server.errors import ProtocolError, RequestDropped
from regroup.server.framing import DEFAULT_MAX_FRAME_BYTES, FrameBuffer

log = logging.getLogger("regroup.server.connection")

DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_MAX_IDLE_MS = 600_000

Response = bytes | None


class _Slot:
    """A response position in request order: ``done`` with ``data`` (None: nothing to send) or ``error``."""

    __slots__ = ("data", "done", "error", "task")

    def __init__(self) -> None:
        self.done = False
        self.data: Response = None
        self.error: BaseException | None = None
        self.task: asyncio.Task[Response] | None = None


class Connection(asyncio.Protocol):
    def __init__(
        self,
        dispatcher: Dispatcher,
        connection_id: int,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_idle_ms: int = DEFAULT_MAX_IDLE_MS,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.connection_id = connection_id
        self.peer = "?"
        self.client_host = ""
        self._frames = FrameBuffer(max_frame_bytes)
        self._max_in_flight = max_in_flight
        self._max_idle_s = max_idle_ms / 1000
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._slots: collections.deque[_Slot] = collections.deque()
        self._reading_paused = False
        self._writing_paused = False
        self._processing = False
        self._closing = False
        self._last_active = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "?"
        self.client_host = peer[0] if isinstance(peer, tuple) and peer else ""
        self._idle_timer = self._loop.call_later(self._max_idle_s, self._check_idle)
        log.debug("connection %d from %s opened", self.connection_id, self.peer)

    def data_received(self, data: bytes) -> None:
        self._last_active = self._loop.time()
        self._frames.feed(data)
        self._process()

    def eof_received(self) -> bool:
        try:
            self._frames.check_complete()
        except ProtocolError as exc:
            log.info("closing connection %d from %s: %s", self.connection_id, self.peer, exc)
        self._close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.debug("connection %d from %s lost: %s", self.connection_id, self.peer, exc)
        self._close()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._on_close is not None:
            self._on_close(self)
            self._on_close = None
        log.debug("connection %d from %s closed", self.connection_id, self.peer)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()
        self._process()

    # ------------------------------------------------------------------------------ requests
    def _process(self) -> None:
        """Handle every complete frame buffered, unless back-pressure says stop."""
        if self._processing or self._closing:
            return
        self._processing = True
        out: list[bytes] = []
        try:
            while not self._closing and not self._writing_paused and len(self._slots) < self._max_in_flight:
                try:
                    frame = self._frames.next_frame()
                    if frame is None:
                        break
                    request = decode_request(frame, self.dispatcher.versions, self.dispatcher.limits)
                except ProtocolError as exc:
                    self._write(out)
                    self._fail(exc)
                    return
                started: Started[Response] = start(
                    self.dispatcher.respond(request, client_host=self.client_host, connection_id=self.connection_id)
                )
                if started.done and not self._slots:
                    if started.error is not None:
                        self._write(out)
                        self._fail(started.error)
                        return
                    if started.result is not None:
                        out.append(started.result)
                    continue
                slot = _Slot()
                if started.done:
                    slot.done, slot.data, slot.error = True, started.result, started.error
                else:
                    assert started.task is not None
                    slot.task = started.task
                    started.task.add_done_callback(functools.partial(self._finished, slot))
                self._slots.append(slot)
            self._write(out)
        finally:
            self._processing = False
            self._update_reading()

    def _finished(self, slot: _Slot, task: asyncio.Task[Response]) -> None:
        """A handler task ended: record its outcome and write whatever is now at the head, in order."""
        slot.done, slot.task = True, None
        if task.cancelled():
            slot.error = asyncio.CancelledError()
        else:
            slot.error = task.exception()
            if slot.error is None:
                slot.data = task.result()
        if self._closing or not self._slots or self._slots[0] is not slot:
            return
        out: list[bytes] = []
        slots = self._slots
        while slots and slots[0].done:
            head = slots.popleft()
            if head.error is not None:
                self._write(out)
                self._fail(head.error)
                return
            if head.data is not None:
                out.append(head.data)
        self._write(out)
        self._update_reading()
        self._process()  # frames left buffered while the connection was at its in-flight limit

    def _write(self, chunks: list[bytes]) -> None:
        if not chunks or self._transport is None or self._closing:
            return
        self._transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        self._last_active = self._loop.time()
        chunks.clear()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closing:
            return
        pause = self._writing_paused or len(self._slots) >= self._max_in_flight
        if pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not pause and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    # ------------------------------------------------------------------------------ closing
    def _fail(self, exc: BaseException) -> None:
        if isinstance(exc, ProtocolError | RequestDropped):
            log.info("closing connection %d from %s: %s", self.connection_id, self.peer, exc)
        elif isinstance(exc, ConnectionError | OSError):
            log.debug("connection %d from %s lost: %s", self.connection_id, self.peer, exc)
        elif not isinstance(exc, asyncio.CancelledError):
            log.error(
                "closing connection %d from %s after an unexpected error", self.connection_id, self.peer, exc_info=exc
            )
        self._close()

    def _close(self) -> None:
        """Cancel outstanding handlers and close the transport (written responses are still flushed)."""
        if self._closing:
            return
        self._closing = True
        for slot in self._slots:
            if slot.task is not None:
                slot.task.cancel()
        if self._transport is not None:
            self._transport.close()

    def close(self) -> list[asyncio.Task[Response]]:
        """Shutdown: close the connection; returns the handler tasks being cancelled (to await them)."""
        tasks = [slot.task for slot in self._slots if slot.task is not None]
        self._close()
        return tasks

    def _check_idle(self) -> None:
        """The idle timer: close the connection, or re-arm for whatever is left of the idle period."""
        self._idle_timer = None
        if self._closing:
            return
        now = self._loop.time()
        if self._slots:
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
        self._close()
