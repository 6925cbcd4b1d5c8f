"""Shared scaffolding for the data-plane handler tests: a fake broker over a real TopicStore, kio request
construction at any version, and a wire round trip of requests and responses."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import io
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta

from regroup.server import group_sync
from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded, response_type
from regroup.server.handlers.topics import build
from regroup.server.topics import TopicStore

API_KEYS = {
    "produce": 0,
    "fetch": 1,
    "list_offsets": 2,
    "metadata": 3,
    "create_topics": 19,
    "delete_topics": 20,
    "init_producer_id": 22,
    "create_partitions": 37,
    "describe_cluster": 60,
    "describe_topic_partitions": 75,
}


def fsync_file_by_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Topic stores opened from now on fsync every round file by file, never with one sync of the whole file
    system: for tests that watch or fail one file's fsync (``PendingSync.run``, ``partition_log._fsync_file``)."""
    monkeypatch.setattr(group_sync, "syncs_filesystem", lambda: False)


@dataclass
class FakeBroker:
    topic_store: TopicStore
    host: str = "localhost"
    port: int = 19092
    auto_create_topics: bool = True
    default_partitions: int = 3

    def endpoint(self, listener: str) -> tuple[str, int]:
        """One listener: the broker's address, whichever the request came in through."""
        return self.host, self.port


def request_module(api: str, version: int) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.request")


def wire(entity: Any) -> Any:
    """``entity`` encoded and decoded again by kio (what a handler gets from the connection layer); a response
    the handler encoded itself (``PreEncoded``) decoded."""
    if isinstance(entity, PreEncoded):
        return entity.decode()
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    decoded, size = entity_reader(type(entity))(buffer.getvalue(), 0)
    assert size == len(buffer.getvalue())
    return decoded


def call(
    handler: Callable[[Any, RequestContext, Any], Awaitable[Any]], broker: FakeBroker, api: str, request: Any
) -> Any:
    """Run ``handler`` on the wire-decoded ``request``; check the response is of the same version and encodes."""
    version = type(request).__version__
    ctx = RequestContext(
        api_key=API_KEYS[api],
        api_version=version,
        correlation_id=1,
        client_id="test",
        client_host="127.0.0.1",
        connection_id=1,
    )
    response = asyncio.run(handler(broker, ctx, wire(request)))
    cls = response_type(response)
    assert cls.__version__ == version and cls.__module__.endswith(".response")
    return wire(response)


async def acall(
    handler: Callable[[Any, RequestContext, Any], Awaitable[Any]], broker: FakeBroker, api: str, request: Any
) -> Any:
    version = type(request).__version__
    ctx = RequestContext(
        api_key=API_KEYS[api],
        api_version=version,
        correlation_id=1,
        client_id="test",
        client_host="127.0.0.1",
        connection_id=1,
    )
    return wire(await handler(broker, ctx, wire(request)))


def produce_request(
    version: int, topic: str | Any, partitions: dict[int, bytes], acks: int = -1, transactional_id: str | None = None
) -> Any:
    """``topic`` is a name, or a TopicInfo for v13+ (by id)."""
    mod = request_module("produce", version)
    parts = tuple(build(mod, "PartitionProduceData", index=p, records=r) for p, r in partitions.items())
    name = topic if isinstance(topic, str) else topic.name
    topic_id = None if isinstance(topic, str) else topic.topic_id
    data = build(mod, "TopicProduceData", name=name, topic_id=topic_id, partition_data=parts)
    return build(
        mod, "ProduceRequest", transactional_id=transactional_id, acks=acks, timeout=_ms(30_000), topic_data=(data,)
    )


def fetch_request(
    version: int,
    topic: Any,
    offsets: dict[int, int],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 1 << 20,
    session_epoch: int = -1,
    isolation_level: int = 0,
) -> Any:
    """``topic``: a TopicInfo (addressed by name or id depending on the version)."""
    mod = request_module("fetch", version)
    parts = tuple(
        build(mod, "FetchPartition", partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes)
        for p, o in offsets.items()
    )
    fetch_topic = build(mod, "FetchTopic", topic=topic.name, topic_id=topic.topic_id, partitions=parts)
    return build(
        mod,
        "FetchRequest",
        replica_id=-1,
        max_wait=_ms(max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=session_epoch,
        topics=(fetch_topic,),
        forgotten_topics_data=(),
        rack_id="",
    )


def _ms(ms: int) -> Any:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


T = TypeVar("T")


async def counting_turns(awaitable: Awaitable[T]) -> tuple[T, int]:
    """``awaitable``'s result, and how many turns of the event loop went by while it ran (a task beside it counts
    them)."""
    turns = 0
    done = False

    async def count() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.get_running_loop().create_task(count())
    try:
        result = await awaitable
    finally:
        done = True
        await counter
    return result, turns
