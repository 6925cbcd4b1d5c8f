"""``console/sse.py``'s fan-out on its own: every subscriber gets every row once encoded, in order; a subscriber
that falls behind is dropped (its stream ends) without holding up the others or the publisher; the number of
streams is capped; a quiet stream carries keepalive comments; ``close`` ends every stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from regroup.console.sse import EventHub


async def take(stream: AsyncIterator[bytes], count: int) -> list[bytes]:
    return [await anext(stream) for _ in range(count)]


def rows(chunks: list[bytes]) -> list[int]:
    out = []
    for chunk in chunks:
        event, data, blank = chunk.decode().split("\n", 2)
        assert (event, blank) == ("event: row", "\n")
        out.append(json.loads(data.removeprefix("data: "))["seq"])
    return out


def test_rows_reach_every_subscriber_and_a_laggard_is_dropped() -> None:
    async def scenario() -> None:
        hub = EventHub(queue_rows=5, max_subscribers=2)
        hub.publish({"seq": -1})  # nobody listens: nothing kept
        fast, slow = hub.subscribe(), hub.subscribe()
        assert fast is not None and slow is not None
        assert hub.subscribe() is None  # (capped at 2)
        assert await anext(fast) == b"retry: 3000\n\n"
        assert await anext(slow) == b"retry: 3000\n\n"
        for seq in range(5):
            hub.publish({"seq": seq})
        assert rows(await take(fast, 5)) == [0, 1, 2, 3, 4]
        hub.publish({"seq": 5})  # the slow one has 5 rows waiting already: dropped
        assert (hub.subscribers, hub.dropped) == (1, 1)
        assert rows(await take(slow, 5)) == [0, 1, 2, 3, 4]
        assert [chunk async for chunk in slow] == []  # its stream ended
        assert rows(await take(fast, 1)) == [5]
        again = hub.subscribe()  # room again
        assert again is not None and await anext(again) == b"retry: 3000\n\n"
        hub.close()
        assert [chunk async for chunk in fast] == [] and [chunk async for chunk in again] == []
        assert hub.subscribers == 0

    asyncio.run(scenario())


def test_a_quiet_stream_keeps_alive() -> None:
    async def scenario() -> None:
        hub = EventHub(keepalive_s=0.01)
        stream = hub.subscribe()
        assert stream is not None
        assert await take(stream, 3) == [b"retry: 3000\n\n", b": keepalive\n\n", b": keepalive\n\n"]
        await stream.aclose()
        assert hub.subscribers == 0

    asyncio.run(scenario())


def test_a_stream_closed_before_it_was_read_is_forgotten() -> None:
    async def scenario() -> None:
        hub = EventHub(max_subscribers=1)
        stream = hub.subscribe()
        assert stream is not None and hub.subscribe() is None
        await stream.aclose()
        assert hub.subscribers == 0 and hub.subscribe() is not None

    asyncio.run(scenario())
