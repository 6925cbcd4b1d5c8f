"""Metadata's auto-creation writes the new topics' directories on the topic store's worker thread, not on the
event loop: many missing topics named at once are created together (``TopicStore.create_reserved``), never one
by one inline; names it cannot create are answered with their errors as before."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded
from regroup.server.handlers import topics as handlers
from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.helpers import request_module

METADATA = 3


class Broker:
    auto_create_topics, default_partitions, host, port, rack, authorizer = True, 3, "127.0.0.1", 9092, None, None

    def __init__(self, store: TopicStore) -> None:
        self.topic_store = store

    def endpoint(self, listener: str) -> tuple[str, int]:
        return self.host, self.port


def _metadata(store: TopicStore, names: list[str]) -> Any:
    mod = request_module("metadata", 12)
    request = mod.MetadataRequest(
        topics=tuple(mod.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=n) for n in names),  # type: ignore[arg-type]
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    ctx = RequestContext(METADATA, 12, 1, "test", "127.0.0.1", 1)
    response = asyncio.run(handlers.handle_metadata(Broker(store), ctx, request))
    assert isinstance(response, PreEncoded)
    return response.decode()


def test_missing_topics_are_created_off_the_loop_together(monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = TopicStore.open(tmp, fsync=FsyncPolicy.NEVER)
        try:
            store.create_topic("existing", 1)

            real = store.create_topic

            def inline(*args: Any, **kwargs: Any) -> Any:
                real(*args, **kwargs)  # (a name it refuses raises here, as it should)
                raise AssertionError("a topic created inline, on the event loop")

            batches: list[int] = []
            created = store.create_reserved

            async def counted(topics: Any) -> Any:
                batches.append(len(topics))
                return await created(topics)

            monkeypatch.setattr(store, "create_topic", inline)
            monkeypatch.setattr(store, "create_reserved", counted)
            names = [f"auto-{i}" for i in range(40)]
            answer = _metadata(store, ["existing", *names, "auto-3", "bad/name"])
            assert batches == [40]
            by_name = {t.name: t for t in answer.topics}
            assert all(by_name[n].error_code == ErrorCode.none and len(by_name[n].partitions) == 3 for n in names)
            assert by_name["existing"].error_code == ErrorCode.none
            assert len(answer.topics) == 42  # (a name asked for twice is answered once)
            assert all(store.topic(n) is not None and not store.is_reserved(n) for n in names)
        finally:
            store.close()


def test_a_name_that_cannot_be_created_is_answered_with_its_error() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = TopicStore.open(tmp, fsync=FsyncPolicy.NEVER)
        try:
            store.create_topic("a.b", 1)
            answer = _metadata(store, ["bad/name", "a_b", "fine"])
            codes = {t.name: t.error_code for t in answer.topics}
            assert codes == {
                "bad/name": ErrorCode.invalid_topic_exception,
                "a_b": ErrorCode.invalid_topic_exception,  # (collides with a.b)
                "fine": ErrorCode.none,
            }
        finally:
            store.close()
