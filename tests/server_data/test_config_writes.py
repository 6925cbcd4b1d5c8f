"""AlterConfigs and IncrementalAlterConfigs store a topic's or a group's configuration off the event loop
(``handlers/configs.py``, ``TopicStore.write_topic_configs``, ``GroupConfigStore.write``): the file is written
and fsynced on a worker thread while the loop serves other work, the change applied once it is on disk; the
alterations of one store follow one another, so two of them at once both count; a topic deleted while its file
is written is answered as unknown, and a topic made again under its name keeps none of it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from regroup.coordinator.config import CoordinatorConfig
from regroup.server import topics as topics_module
from regroup.server.api import RequestContext
from regroup.server.group_configs import GroupConfigStore
from regroup.server.handlers import configs
from regroup.server.topic_configs import CONFIG_FILE
from regroup.server.topics import TopicStore
from regroup.storage import files
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.helpers import request_module

TOPIC, GROUP = 2, 32
SET = 0
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


class _Coordinator:
    """What an alteration tells the coordinator of a group's new settings."""

    def __init__(self) -> None:
        self.updated: list[str] = []

    def update_group_config(self, group: str, config: Any) -> None:
        self.updated.append(group)


class _Broker:
    authorizer = None

    def __init__(self, root: Path, store: TopicStore, groups: GroupConfigStore) -> None:
        self.root = root  # the topic store's directory
        self.topic_store = store
        self.group_configs = groups
        self.coordinator = _Coordinator()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[_Broker]:
    store = TopicStore.open(tmp_path / "topics", fsync=FsyncPolicy.ALWAYS)
    try:
        store.create_topic("t", 1)
        yield _Broker(
            tmp_path / "topics",
            store,
            GroupConfigStore(tmp_path / "group-configs.json", CoordinatorConfig(), sync=True),
        )
    finally:
        store.close()


def _alter(broker: _Broker, resource_type: int, name: str, configs_set: dict[str, str]) -> Any:
    mod = request_module("incremental_alter_configs", 1)
    request = mod.IncrementalAlterConfigsRequest(
        resources=(
            mod.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=tuple(
                    mod.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in configs_set.items()
                ),
            ),
        ),
        validate_only=False,
    )
    ctx = RequestContext(44, 1, 1, "test", "127.0.0.1", 1)
    return configs.handle_incremental_alter_configs(broker, ctx, request)


def _codes(response: Any) -> list[int]:
    return [r.error_code for r in response.responses]


def _slow_writes(monkeypatch: pytest.MonkeyPatch, seconds: float, entered: list[str] | None = None) -> None:
    """Every configuration file's write (a topic's, a group's) takes ``seconds`` longer; ``entered`` gets the
    name of each thread that writes."""
    topic_write, group_write = files.write_file_atomically_in, files.write_file_atomically

    def slow(write: Callable[..., None]) -> Callable[..., None]:
        def slowed(*args: Any, **kwargs: Any) -> None:
            if entered is not None:
                entered.append(threading.current_thread().name)
            time.sleep(seconds)
            write(*args, **kwargs)

        return slowed

    monkeypatch.setattr(topics_module, "write_file_atomically_in", slow(topic_write))
    monkeypatch.setattr("regroup.server.group_configs.write_file_atomically", slow(group_write))


def test_a_topic_s_file_is_written_off_the_loop_and_applied_once_written(
    broker: _Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers: list[str] = []
    _slow_writes(monkeypatch, 0.2, writers)
    store = broker.topic_store

    async def scenario() -> tuple[Any, int, dict[str, str]]:
        task = asyncio.ensure_future(_alter(broker, TOPIC, "t", {"retention.ms": "12345"}))
        turns = 0
        while not writers:  # (the loop turns while the worker writes)
            await asyncio.sleep(0.001)
        seen_while_writing = store.configs.overrides("t")
        while not task.done():
            turns += 1
            await asyncio.sleep(0.001)
        return task.result(), turns, seen_while_writing

    response, turns, seen_while_writing = asyncio.run(scenario())
    assert _codes(response) == [ErrorCode.none]
    assert writers and threading.main_thread().name not in writers
    assert turns > 10  # (0.2 s of writing: the loop served this test's other coroutine meanwhile)
    assert seen_while_writing == {}  # not applied before it is on disk
    assert store.configs.overrides("t") == {"retention.ms": "12345"}
    assert '"retention.ms": "12345"' in (broker.root / "topics" / "t" / CONFIG_FILE).read_text()


def test_two_alterations_of_one_topic_at_once_both_count(broker: _Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second reads the topic's overrides only once the first is written and applied: neither change is
    lost, in the store or in its file."""
    _slow_writes(monkeypatch, 0.05)

    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                _alter(broker, TOPIC, "t", {"retention.ms": "12345"}),
                _alter(broker, TOPIC, "t", {"segment.bytes": "1048576"}),
            )
        )

    responses = asyncio.run(both())
    assert [_codes(r) for r in responses] == [[ErrorCode.none], [ErrorCode.none]]
    both_set = {"retention.ms": "12345", "segment.bytes": "1048576"}
    assert broker.topic_store.configs.overrides("t") == both_set
    assert json.loads((broker.root / "topics" / "t" / CONFIG_FILE).read_text()) == both_set


def test_two_alterations_of_groups_at_once_both_count(broker: _Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_writes(monkeypatch, 0.05)

    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                _alter(broker, GROUP, "a", {SESSION: "50000"}),
                _alter(broker, GROUP, "b", {HEARTBEAT: "6000"}),
            )
        )

    responses = asyncio.run(both())
    assert [_codes(r) for r in responses] == [[ErrorCode.none], [ErrorCode.none]]
    expected = [("a", {SESSION: "50000"}), ("b", {HEARTBEAT: "6000"})]
    assert list(broker.group_configs.items()) == expected
    assert broker.coordinator.updated == ["a", "b"]
    again = GroupConfigStore(broker.group_configs.path, CoordinatorConfig(), sync=True)
    again.load()
    assert list(again.items()) == expected


def test_a_topic_deleted_while_its_file_is_written(broker: _Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unknown topic, and the topic made again under the name meanwhile has no overrides, in the store or on
    disk (the write went to the deleted topic's directory)."""
    writers: list[str] = []
    _slow_writes(monkeypatch, 0.2, writers)
    store = broker.topic_store

    async def scenario() -> Any:
        task = asyncio.ensure_future(_alter(broker, TOPIC, "t", {"retention.ms": "12345"}))
        while not writers:
            await asyncio.sleep(0.001)
        assert store.delete_topic("t")
        store.create_topic("t", 1)
        return await task

    response = asyncio.run(scenario())
    assert _codes(response) == [ErrorCode.unknown_topic_or_partition]
    assert store.configs.overrides("t") == {}
    assert not (broker.root / "topics" / "t" / CONFIG_FILE).exists()


def test_an_alteration_cancelled_while_its_file_is_written(broker: _Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The write goes on and its change is applied (the file and the store agree), and the next alteration of
    the topic waits for it and builds on it."""
    writers: list[str] = []
    _slow_writes(monkeypatch, 0.1, writers)
    store = broker.topic_store

    async def scenario() -> Any:
        first = asyncio.ensure_future(_alter(broker, TOPIC, "t", {"retention.ms": "12345"}))
        while not writers:
            await asyncio.sleep(0.001)
        first.cancel()
        second = await _alter(broker, TOPIC, "t", {"segment.bytes": "1048576"})
        assert first.cancelled()
        return second

    response = asyncio.run(scenario())
    assert _codes(response) == [ErrorCode.none]
    both_set = {"retention.ms": "12345", "segment.bytes": "1048576"}
    assert store.configs.overrides("t") == both_set
    assert json.loads((broker.root / "topics" / "t" / CONFIG_FILE).read_text()) == both_set
