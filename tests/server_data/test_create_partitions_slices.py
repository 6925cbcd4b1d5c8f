"""CreatePartitions of many topics gives the event loop a turn between slices of topics, each slice's growth one
cluster image (``handlers/partitions._ImageSlices``): every topic grown, the answer whole, the images fewer than
the topics, and a request of few topics one image as before. A topic's ``topic.json`` is written on the store's
worker thread while the loop turns, the new count taken once written; two growths of one topic at once follow one
another; a topic deleted while it grows is unknown, and one made again under its name keeps its own count."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from regroup.server import topics as topics_module
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


def _request(counts: dict[str, int]) -> Any:
    mod = request_module("create_partitions", 3)
    return mod.CreatePartitionsRequest(
        topics=tuple(mod.CreatePartitionsTopic(name=n, count=c, assignments=None) for n, c in counts.items()),  # type: ignore[arg-type]
        timeout=0,  # type: ignore[arg-type]
        validate_only=False,
    )


def _handled(store: TopicStore, counts: dict[str, int]) -> Any:
    ctx = RequestContext(CREATE_PARTITIONS, 3, 1, "test", "127.0.0.1", 1)
    return partitions.handle_create_partitions(Broker(store), ctx, _request(counts))


def _slow_growth(monkeypatch: pytest.MonkeyPatch, seconds: float, threads: list[str]) -> None:
    """Every ``topic.json`` replaced ``seconds`` later than it would be; ``threads`` gets each writer's name."""
    grow = topics_module._GrowTopicFile.__call__

    def slowed(job: Any) -> Any:
        threads.append(threading.current_thread().name)
        time.sleep(seconds)
        return grow(job)

    monkeypatch.setattr(topics_module._GrowTopicFile, "__call__", slowed)


def _count_on_disk(root: Path, name: str) -> int:
    return int(json.loads((root / "topics" / name / "topic.json").read_text())["partitions"])


def test_a_topic_file_is_written_off_the_loop_and_the_count_taken_once_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    _slow_growth(monkeypatch, 0.2, threads)
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS) as store:
        store.create_topic("t", 2)

        async def scenario() -> tuple[Any, int, int]:
            task = asyncio.ensure_future(_handled(store, {"t": 5}))
            while not threads:
                await asyncio.sleep(0.001)
            count_while_writing = store.topic("t").partitions  # type: ignore[union-attr]
            turns = 0
            while not task.done():
                turns += 1
                await asyncio.sleep(0.001)
            return task.result(), turns, count_while_writing

        response, turns, count_while_writing = asyncio.run(scenario())
        assert [r.error_code for r in response.results] == [ErrorCode.none]
        assert threading.main_thread().name not in threads
        assert turns > 10 and count_while_writing == 2
        assert store.topic("t").partitions == 5 and _count_on_disk(tmp_path, "t") == 5  # type: ignore[union-attr]


def test_two_growths_of_one_topic_at_once_follow_one_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second is checked against the first's count once that is written: both succeed, the topic ends with
    the second's count in the store and on disk."""
    _slow_growth(monkeypatch, 0.05, [])
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS) as store:
        store.create_topic("t", 2)

        async def both() -> list[Any]:
            return list(await asyncio.gather(_handled(store, {"t": 4}), _handled(store, {"t": 6})))

        responses = asyncio.run(both())
        assert [[r.error_code for r in resp.results] for resp in responses] == [[ErrorCode.none], [ErrorCode.none]]
        assert store.topic("t").partitions == 6 and store.partition_count == 6  # type: ignore[union-attr]
        assert _count_on_disk(tmp_path, "t") == 6


def test_a_topic_deleted_while_it_grows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION; the topic made again under its name meanwhile keeps its own count."""
    threads: list[str] = []
    _slow_growth(monkeypatch, 0.2, threads)
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS) as store:
        store.create_topic("t", 2)

        async def scenario() -> Any:
            task = asyncio.ensure_future(_handled(store, {"t": 5}))
            while not threads:
                await asyncio.sleep(0.001)
            assert store.delete_topic("t")
            store.create_topic("t", 3)
            return await task

        response = asyncio.run(scenario())
        assert [r.error_code for r in response.results] == [ErrorCode.unknown_topic_or_partition]
        assert store.topic("t").partitions == 3 and store.partition_count == 3  # type: ignore[union-attr]
        assert _count_on_disk(tmp_path, "t") == 3
