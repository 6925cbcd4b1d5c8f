"""Server-Sent Events fan-out (``GET /api/events``): every row the server's group events produce is sent to every
subscriber as ``event: row`` + ``data: <the row as JSON>``. The stream starts with a ``retry:`` line (how long a
browser waits before reconnecting) and carries a ``: keepalive`` comment every ``KEEPALIVE_S`` when nothing else
is sent, so proxies and clients see a live connection.

Each subscriber has a bounded queue: a subscriber that falls ``QUEUE_ROWS`` rows behind is dropped (its stream
ends; a browser reconnects), so a slow reader never slows the server nor makes it hold unbounded memory. At most
``max_subscribers`` streams are open at once. ``publish`` with nobody subscribed costs one test, and a row is
encoded once however many subscribers there are."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["EventHub", "Subscription"]

KEEPALIVE_S: Final = 15.0
RETRY_MS: Final = 3_000
QUEUE_ROWS: Final = 1_000
DEFAULT_MAX_SUBSCRIBERS: Final = 32
_END: Final = b""  # queued to end a stream


class _Subscriber:
    __slots__ = ("dropped", "queue")

    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(size + 1)  # (+1: room for the end)
        self.dropped = False


class EventHub:
    """``publish(row)`` from the server's event sink; ``subscribe()`` gives a stream's chunks, or None when
    ``max_subscribers`` streams are open already."""

    def __init__(
        self,
        *,
        max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS,
        queue_rows: int = QUEUE_ROWS,
        keepalive_s: float = KEEPALIVE_S,
    ) -> None:
        self._max = max_subscribers
        self._rows = queue_rows
        self._keepalive_s = keepalive_s
        self._subscribers: set[_Subscriber] = set()
        #: subscribers dropped for falling behind, since start
        self.dropped = 0

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def publish(self, row: Mapping[str, Any]) -> None:
        if not self._subscribers:
            return
        self._send(b"event: row\ndata: " + json.dumps(row, separators=(",", ":"), default=str).encode() + b"\n\n")

    def publish_lines(self, lines: Sequence[str]) -> None:
        """Rows already encoded as their JSON lines (the same as ``publish`` of each row would send)."""
        if not self._subscribers:
            return
        for line in lines:
            self._send(b"event: row\ndata: " + line.encode() + b"\n\n")

    def _send(self, chunk: bytes) -> None:
        for subscriber in list(self._subscribers):
            if subscriber.queue.qsize() >= self._rows:
                self._drop(subscriber)
            else:
                subscriber.queue.put_nowait(chunk)

    def subscribe(self) -> Subscription | None:
        """A new stream, counted from now on (its reader must read it to its end or ``aclose()`` it)."""
        if len(self._subscribers) >= self._max:
            return None
        subscriber = _Subscriber(self._rows)
        self._subscribers.add(subscriber)
        return Subscription(self, subscriber)

    def close(self) -> None:
        """End every stream."""
        for subscriber in list(self._subscribers):
            self._subscribers.discard(subscriber)
            subscriber.queue.put_nowait(_END)

    def _drop(self, subscriber: _Subscriber) -> None:
        self._subscribers.discard(subscriber)
        subscriber.dropped = True
        self.dropped += 1
        subscriber.queue.put_nowait(_END)

    def _leave(self, subscriber: _Subscriber) -> None:
        self._subscribers.discard(subscriber)


class Subscription:
    """One subscriber's stream: the ``retry:`` line, then its rows and keepalive comments, until it is dropped,
    the hub closes or ``aclose()``."""

    def __init__(self, hub: EventHub, subscriber: _Subscriber) -> None:
        self._hub = hub
        self._subscriber = subscriber
        self._started = False
        self._ended = False

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> bytes:
        if self._ended:
            raise StopAsyncIteration
        if not self._started:
            self._started = True
            return f"retry: {RETRY_MS}\n\n".encode()
        try:
            chunk = await asyncio.wait_for(self._subscriber.queue.get(), self._hub._keepalive_s)
        except TimeoutError:
            return b": keepalive\n\n"
        except BaseException:
            await self.aclose()
            raise
        if chunk == _END:
            await self.aclose()
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        self._ended = True
        self._hub._leave(self._subscriber)
