"""CreatePartitions of many topics gives the event loop a turn between slices of topics, each slice's growth one
cluster image (``handlers/partitions._ImageSlices``): every topic grown, the answer whole, the images fewer than
the topics, and a request of few topics one image as before."""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from regroup.server.api import RequestContext
from regroup.server.handlers import partitions
from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.helpers import counting_turns, request_module

CREATE_PARTITIONS = 37


class Broker:
    authorizer = None

    def __init__(self, store: TopicStore) -> None:
        self.topic_store = store


def _grow(store: TopicStore, counts: dict[str, int]) -> tuple[Any, int]:
    mod = request_module("create_partitions", 3)
    request = mod.CreatePartitionsRequest(
        topics=tuple(mod.CreatePartitionsTopic(name=n, count=c, assignments=None) for n, c in counts.items()),  # type: ignore[arg-type]
        timeout=0,  # type: ignore[arg-type]
        validate_only=False,
    )
    ctx = RequestContext(CREATE_PARTITIONS, 3, 1, "test", "127.0.0.1", 1)
    return asyncio.run(counting_turns(partitions.handle_create_partitions(Broker(store), ctx, request)))


@pytest.mark.parametrize(("slice_s", "many"), [(0.0, True), (60.0, False)])
def test_many_topics_grow_in_slices_one_image_each(monkeypatch: pytest.MonkeyPatch, slice_s: float, many: bool) -> None:
    monkeypatch.setattr(partitions, "GROW_SLICE_S", slice_s)
    n = 12
    with tempfile.TemporaryDirectory() as tmp:
        store = TopicStore.open(tmp, fsync=FsyncPolicy.NEVER)
        try:
            for i in range(n):
                store.create_topic(f"t{i}", 1)
            images: list[int] = []
            store.on_change = lambda: images.append(sum(store.topic(f"t{i}").partitions for i in range(n)))  # type: ignore[union-attr]
            response, turns = _grow(store, {f"t{i}": 3 for i in range(n)})
            assert [r.error_code for r in response.results] == [ErrorCode.none] * n
            assert all(store.topic(f"t{i}").partitions == 3 for i in range(n))  # type: ignore[union-attr]
            assert images[-1] == 3 * n and images == sorted(images)
            if many:
                assert turns >= n - 1 and 2 <= len(images) <= n
            else:
                assert len(images) == 1
        finally:
            store.close()
