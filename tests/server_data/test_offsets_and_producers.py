"""ListOffsets and InitProducerId (idempotent producers) handlers; TopicStore durability (topics, ids, producer
ids across restarts)."""

from __future__ import annotations

import asyncio
import datetime
import threading
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from regroup.server import topics as topics_module
from regroup.server.handlers.data import handle_list_offsets, handle_produce
from regroup.server.handlers.topics import build
from regroup.server.handlers.transactions import init_producer_id as handle_init_producer_id
from regroup.server.topics import InvalidTopicError, TopicExistsError, TopicStore, validate_topic_name
from regroup.storage.record_log import FsyncPolicy, LogLockedError
from tests.server_data.batches import make_batch
from tests.server_data.helpers import FakeBroker, call, produce_request, request_module


def list_offsets(
    broker: FakeBroker, version: int, topic: str, targets: dict[int, int]
) -> dict[int, tuple[ErrorCode, int, int]]:
    mod = request_module("list_offsets", version)
    parts = tuple(
        build(mod, "ListOffsetsPartition", partition_index=p, timestamp=t, current_leader_epoch=-1)
        for p, t in targets.items()
    )
    request = build(
        mod,
        "ListOffsetsRequest",
        replica_id=-1,
        isolation_level=0,
        topics=(build(mod, "ListOffsetsTopic", name=topic, partitions=parts),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)),
    )
    [response] = call(handle_list_offsets, broker, "list_offsets", request).topics
    return {p.partition_index: (p.error_code, p.timestamp, p.offset) for p in response.partitions}


@pytest.mark.parametrize("version", range(1, 12))
def test_list_offsets(broker: FakeBroker, store: TopicStore, version: int) -> None:
    store.create_topic("t", 2)
    call(
        handle_produce,
        broker,
        "produce",
        produce_request(9, "t", {0: make_batch([b"a", b"b"], timestamps=[1000, 3000])}),
    )
    call(handle_produce, broker, "produce", produce_request(9, "t", {0: make_batch([b"c"], timestamps=[2000])}))
    assert list_offsets(broker, version, "t", {0: -1, 1: -1}) == {
        0: (ErrorCode.none, -1, 3),
        1: (ErrorCode.none, -1, 0),
    }
    assert list_offsets(broker, version, "t", {0: -2}) == {0: (ErrorCode.none, -1, 0)}
    assert list_offsets(broker, version, "t", {0: 1500}) == {0: (ErrorCode.none, 3000, 1)}
    assert list_offsets(broker, version, "t", {0: 2500}) == {0: (ErrorCode.none, 3000, 1)}
    assert list_offsets(broker, version, "t", {0: 3001, 1: 0}) == {
        0: (ErrorCode.none, -1, -1),
        1: (ErrorCode.none, -1, -1),
    }
    if version >= 7:
        assert list_offsets(broker, version, "t", {0: -3, 1: -3}) == {
            0: (ErrorCode.none, 3000, 1),
            1: (ErrorCode.none, -1, -1),
        }
    if version >= 8:
        assert list_offsets(broker, version, "t", {0: -4}) == {0: (ErrorCode.none, -1, 0)}
    if version >= 9:
        assert list_offsets(broker, version, "t", {0: -5}) == {0: (ErrorCode.none, -1, -1)}
    assert list_offsets(broker, version, "t", {7: -1}) == {7: (ErrorCode.unknown_topic_or_partition, -1, -1)}
    assert list_offsets(broker, version, "nope", {0: -1}) == {0: (ErrorCode.unknown_topic_or_partition, -1, -1)}


def init_producer_id(
    broker: FakeBroker, version: int, transactional_id: str | None = None
) -> tuple[ErrorCode, int, int]:
    mod = request_module("init_producer_id", version)
    request = build(
        mod,
        "InitProducerIdRequest",
        transactional_id=transactional_id,
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
        producer_id=-1,
        producer_epoch=-1,
    )
    response = call(handle_init_producer_id, broker, "init_producer_id", request)
    return response.error_code, response.producer_id, response.producer_epoch


@pytest.mark.parametrize("version", range(7))
def test_init_producer_id(broker: FakeBroker, version: int) -> None:
    first, second = init_producer_id(broker, version), init_producer_id(broker, version)
    assert first == (ErrorCode.none, 0, 0) and second == (ErrorCode.none, 1, 0)
    # a transactional id is the transaction coordinator's (this broker has none: retriable)
    assert init_producer_id(broker, version, "tx") == (ErrorCode.coordinator_not_available, -1, -1)


def test_producer_ids_are_never_reused_across_restarts(tmp_path: Path) -> None:
    with TopicStore.open(tmp_path) as store:
        assert [store.allocate_producer_id() for _ in range(3)] == [0, 1, 2]
    with TopicStore.open(tmp_path) as store:
        assert store.allocate_producer_id() == 1000  # the rest of the reserved block is skipped


def _watch_id_writes(monkeypatch: pytest.MonkeyPatch, fail_on_thread: bool = False) -> list[tuple[str, int]]:
    """Every write of ``producer-ids``: the writing thread's name and the value written (``fail_on_thread``:
    those off the calling thread fail)."""
    writes: list[tuple[str, int]] = []
    write = topics_module._write_producer_ids

    def watched(directory: Path, reserved: int, sync: bool) -> None:
        thread = threading.current_thread()
        if fail_on_thread and thread is not threading.main_thread():
            raise OSError(28, "No space left on device")
        writes.append((thread.name, reserved))
        write(directory, reserved, sync)

    monkeypatch.setattr(topics_module, "_write_producer_ids", watched)
    return writes


def test_the_next_block_of_producer_ids_is_reserved_off_the_calling_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first block is written by the caller; every later one on the store's thread, once half of the block
    before it is handed out, so the event loop finds it ready (or waits for that one small write). Every id once,
    in order, and a restart never hands out one again."""
    writes = _watch_id_writes(monkeypatch)
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS) as store:
        ids = [store.allocate_producer_id() for _ in range(2_600)]
    assert ids == list(range(2_600))
    assert writes[0] == (threading.main_thread().name, 1_000)
    assert [value for _, value in writes] == [1_000, 2_000, 3_000, 4_000]
    assert all(name.startswith("producer-ids") for name, _ in writes[1:])
    with TopicStore.open(tmp_path) as store:
        assert store.allocate_producer_id() >= 2_600


def test_a_failed_reservation_ahead_leaves_it_to_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes = _watch_id_writes(monkeypatch, fail_on_thread=True)
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS) as store:
        ids = [store.allocate_producer_id() for _ in range(2_100)]
    assert ids == list(range(2_100))
    assert writes == [(threading.main_thread().name, v) for v in (1_000, 2_000, 3_000)]
    with TopicStore.open(tmp_path) as store:
        assert store.allocate_producer_id() == 3_000


def test_store_survives_restart(tmp_path: Path) -> None:
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS) as store:
        info = store.create_topic("keep", 2)
        store.create_topic("drop", 1)
        plog = store.partition("keep", 1)
        assert plog is not None
        plog.append(make_batch([b"x", b"y"]))
        assert store.delete_topic("drop") and not store.delete_topic("drop")
        with pytest.raises(LogLockedError):
            TopicStore.open(tmp_path)
    (tmp_path / "staging" / "leftover").mkdir()  # a create interrupted by a crash
    with TopicStore.open(tmp_path) as store:
        assert store.topics() == {"keep": info}
        assert store.topic_by_id(info.topic_id) == info
        reopened = store.partition("keep", 1)
        assert reopened is not None and reopened.log_end_offset == 2
        assert store.partition("keep", 2) is None and store.partition("drop", 0) is None
        assert not (tmp_path / "staging" / "leftover").exists()
        assert store.create_topic("drop", 1).topic_id != info.topic_id  # a deleted name can be reused


@pytest.mark.parametrize("step", ["write", "fsync", "rename", "fsync-topics"])
def test_a_creation_that_fails_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """A full disk (or no descriptors left) at any step: nothing acknowledged, nothing half-created, the
    name still free, and the directory opens again."""
    import regroup.server.topics as topics_module

    store = TopicStore.open(tmp_path, fsync=FsyncPolicy.ALWAYS)
    full = OSError(28, "No space left on device")
    real_fsync_dir = topics_module.fsync_dir

    def fail(*args: object, **kwargs: object) -> None:
        raise full

    if step == "write":
        monkeypatch.setattr(Path, "write_text", fail)
    elif step == "fsync":
        monkeypatch.setattr(topics_module, "_fsync_path", fail)
    elif step == "rename":
        monkeypatch.setattr(topics_module.os, "rename", fail)
    else:
        monkeypatch.setattr(topics_module, "fsync_dir", lambda d: fail() if d.name == "topics" else real_fsync_dir(d))
    with pytest.raises(OSError, match="No space"):
        store.create_topic("t", 10_000)
    monkeypatch.undo()
    assert store.topics() == {} and store.partition_count == 0
    assert list((tmp_path / "staging").iterdir()) == [] and list((tmp_path / "topics").iterdir()) == []
    assert store.create_topic("t", 3).partitions == 3  # the name is free: nothing was left behind
    store.close()
    with TopicStore.open(tmp_path) as reopened:
        assert list(reopened.topics()) == ["t"]


def test_topic_names() -> None:
    for good in ["a", "A.b_c-9", "x" * 249, "..."]:
        validate_topic_name(good)
    for bad in ["", ".", "..", "x" * 250, "a b", "ä", "a/b"]:
        with pytest.raises(InvalidTopicError):
            validate_topic_name(bad)


def test_create_topic_checks(store: TopicStore) -> None:
    store.create_topic("a.b", 1)
    with pytest.raises(TopicExistsError):
        store.create_topic("a.b", 1)
    with pytest.raises(InvalidTopicError):
        store.create_topic("a_b", 1)  # collides with a.b in Kafka's metric names
    with pytest.raises(ValueError, match="at least one partition"):
        store.create_topic("c", 0)


def test_name_collisions_follow_creations_deletions_and_restarts(tmp_path: Path) -> None:
    with TopicStore.open(tmp_path) as store:
        store.create_topic("x.y_z", 1)
        with pytest.raises(InvalidTopicError, match=r"collides with existing topic: x\.y_z"):
            store.create_topic("x_y.z", 1)
    with TopicStore.open(tmp_path) as store:
        with pytest.raises(InvalidTopicError, match="collides"):
            store.create_topic("x_y_z", 1)
        assert store.delete_topic("x.y_z")
        store.create_topic("x_y_z", 1)  # free again once the other is gone
        with pytest.raises(InvalidTopicError, match="collides with existing topic: x_y_z"):
            store.create_topic("x.y.z", 1)


async def _wait(store: TopicStore) -> bool:
    return await store.wait_for_append([("t", 0)], 0.05)


def test_wait_for_append_times_out_and_cleans_up(store: TopicStore) -> None:
    store.create_topic("t", 1)
    assert asyncio.run(_wait(store)) is False
    assert store._waiters == {}
